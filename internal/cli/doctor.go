package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/module"
)

func newDoctorCommand(g *globals) *cobra.Command {
	var url string
	var strict, asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the deployment's set-up and health",
		Long: `Check the schema, the clock, the method registry, the PKI bundle, whether gateways can
authenticate daemons and the API can reach them, and once migrated, running problems: overdue
reconcile work, a stalled command sweeper, gateway headroom, silent nodes, old daemons and
expiring node certificates, auth methods whose identity provider's discovery document or keys
do not answer; it also reports the sessions by transport (direct h2 or WebSocket)
per gateway. Exits non-zero on errors, and on warnings with --strict.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := g.databaseURL(url)
			if err != nil {
				return err
			}
			secret := os.Getenv("BETTER_COMPUTE_SECRET")
			var set moduleset.Set
			allowPrivateIssuers := false
			if g.configPath != "" {
				cfg, err := config.Load(g.configPath, os.Environ())
				if err != nil {
					return err
				}
				secret = cfg.Secret
				allowPrivateIssuers = cfg.Auth.AllowPrivateIssuers
				if set, err = g.enable(cfg); err != nil {
					return err
				}
			}
			pool, err := database.Open(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer pool.Close()
			findings, err := doctor.Run(cmd.Context(), doctor.Options{
				Pool: pool, Secret: secret, AllowPrivateIssuers: allowPrivateIssuers, ModuleFiles: set.Files(), Checks: set.Checks(module.CheckDeps{Pool: pool, Secret: secret}),
			})
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(findings); err != nil {
					return err
				}
			} else {
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "SEVERITY\tCHECK\tFINDING\tFIX")
				for _, f := range findings {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Severity, f.Check, f.Cause, f.Fix)
				}
				if err := tw.Flush(); err != nil {
					return err
				}
			}
			switch worst := doctor.Worst(findings); {
			case worst == doctor.Error:
				return errors.New("doctor found errors")
			case worst == doctor.Warning && strict:
				return errors.New("doctor found warnings (--strict)")
			}
			return nil
		},
	}
	databaseURLFlag(cmd, &url)
	cmd.Flags().BoolVar(&strict, "strict", false, "exit non-zero on warnings too")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the findings as JSON")
	return cmd
}
