package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/internal/apispec"
)

// newReferenceCommand writes the API reference that docs/ holds; scripts/generate runs it.
func newReferenceCommand(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "reference",
		Short:  "Write the API reference, openapi.json and api.md, from the method registry",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			doc, err := apispec.Reference(g.modules.Files()...)
			if err != nil {
				return err
			}
			body, err := apispec.Encode(doc)
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "openapi.json"), body, 0o644); err != nil {
				return fmt.Errorf("reference: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, "api.md"), apispec.Markdown(doc), 0o644); err != nil {
				return fmt.Errorf("reference: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "docs", "directory to write openapi.json and api.md to")
	return cmd
}
