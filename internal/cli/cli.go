// Package cli is the command line of the API, built at run time from the method registry: a
// command `better-compute <group> <name>` for every method, its flags from the request message,
// its help from the proto comments, so no command is kept by hand and none can be missing.
package cli

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/apispec"
	"github.com/better-compute/better-compute/internal/registry"
)

// Options configure the commands Attach adds.
type Options struct {
	// Resolver finds the API; the caller adds its flags to the root (Attach does, when its flags
	// are not there yet).
	Resolver *Resolver
	// HTTPClient makes the calls; nil means a default client (the deadline is --request-timeout).
	HTTPClient connect.HTTPClient
	// OpenBrowser opens a sign-in URL for login --sso; nil means the desktop's opener (xdg-open or
	// open) where there is one. The URL is printed either way.
	OpenBrowser func(url string) error
}

// Help is the section of the root command's help about the API commands.
const Help = `Every API method is a command, better-compute <group> <method>, for example
"better-compute nodes list" or "better-compute join-tokens create --max-uses 5": scalar fields of
the request are flags, anything else goes in --data '{…}' (protojson, or @file, @- for stdin).
-o table|json|yaml chooses the output. "better-compute login --api URL --api-key KEY" saves a
context ("login --api URL --sso --tenant T" signs in through the tenant's identity provider
instead); BETTER_COMPUTE_URL and BETTER_COMPUTE_API_KEY override it, --api and --api-key override
both. See docs/cli.md.

` + ExitCodesHelp

// Attach adds to root a command for every method of reg (under a command per group, joining a
// group command root already has, such as iam), and login, logout and context.
func Attach(root *cobra.Command, reg *registry.Registry, o Options) error {
	if o.Resolver == nil {
		o.Resolver = &Resolver{}
	}
	if root.PersistentFlags().Lookup("context") == nil {
		o.Resolver.AddFlags(root.PersistentFlags())
	}
	if o.HTTPClient == nil {
		o.HTTPClient = http.DefaultClient
	}
	docs, err := apispec.LoadDocs()
	if err != nil {
		return err
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	groups := map[string]*cobra.Command{}
	for _, m := range reg.Methods() {
		name := kebab(m.Group)
		g, ok := groups[name]
		if !ok {
			g = findCommand(root, name)
			if g == nil {
				g = &cobra.Command{
					Use:   name,
					Short: groupSummary(docs, m),
					Long:  strings.TrimSpace(docs.Of(m.Descriptor.Parent().FullName()) + "\n\n" + ExitCodesHelp),
				}
				root.AddCommand(g)
			}
			groups[name] = g
		}
		g.AddCommand(methodCommand(m, reg, docs, &o))
	}
	root.AddCommand(loginCommand(&o), logoutCommand(&o), contextCommand(&o))
	return nil
}

// findCommand is root's direct subcommand called name, or nil.
func findCommand(root *cobra.Command, name string) *cobra.Command {
	i := slices.IndexFunc(root.Commands(), func(c *cobra.Command) bool { return c.Name() == name })
	if i < 0 {
		return nil
	}
	return root.Commands()[i]
}

// groupSummary is the first sentence of the group's service comment, or a plain description.
func groupSummary(docs *apispec.Docs, m *registry.Method) string {
	if s := summary(docs, m.Descriptor.Parent()); s != "" {
		return s
	}
	return fmt.Sprintf("Call the API's %s methods", m.Group)
}

// summary is the first sentence of d's comment without the element's name it starts with, as
// the proto style writes them: "NodesService manages the nodes…" becomes "Manages the nodes…".
func summary(docs *apispec.Docs, d protoreflect.Descriptor) string {
	s := docs.Summary(d.FullName())
	rest, ok := strings.CutPrefix(s, string(d.Name())+" ")
	if !ok || rest == "" {
		return s
	}
	return strings.ToUpper(rest[:1]) + rest[1:]
}

// CommandPath is the words of m's command below the root: ["join-tokens", "create"].
func CommandPath(m *registry.Method) []string { return []string{kebab(m.Group), kebab(m.Name)} }

// addOutputFlag adds -o.
func addOutputFlag(fs *pflag.FlagSet, target *string) {
	fs.StringVarP(target, "output", "o", outputTable, "output: table, json (protojson) or yaml")
}

func checkOutput(o string) error {
	switch o {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return usageError(fmt.Errorf("--output must be table, json or yaml, got %q", o))
}
