package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/client"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
)

// defaultContext is the name login gives a context without --context.
const defaultContext = "default"

func loginCommand(o *Options) *cobra.Command {
	var sso ssoFlags
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Check an API key, or sign in through the identity provider, and save it as a context",
		Long: `Check --api-key against --api (iam/whoAmI), then save both as the context --context
(default "default") in contexts.yaml of the user configuration directory, and make it current:
later commands call that API with that key without --api and --api-key.

With --sso, sign in through an auth method of --tenant instead (the tenant's only one, or
--method): the command prints the identity provider's sign-in URL (and opens a browser where it
can), receives the provider's redirect on a loopback address (http://127.0.0.1:PORT/callback,
PORT from --callback-port or any free one), and saves the session token it gets, with its
expiry, in the context. With --device it uses the device flow instead, where the provider offers
it: open the printed URL on any device and enter the code. logout ends the session.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := o.Resolver
			name := r.context
			if name == "" {
				name = defaultContext
			}
			if sso.enabled {
				return ssoLogin(cmd, o, &sso, name)
			}
			if sso.tenant != "" || sso.method != "" || sso.device || sso.callbackPort != 0 {
				return usageError(errors.New("--tenant, --method, --device and --callback-port go with --sso"))
			}
			if r.api == "" || r.apiKey == "" {
				return usageError(errors.New("login needs --api and --api-key (or --sso and --tenant)"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			c := client.New(r.api, client.WithAPIKey(r.apiKey), client.WithHTTPClient(o.HTTPClient))
			me, err := c.IAM.WhoAmI(ctx, &iamv1.WhoAmIRequest{})
			if err != nil {
				return err
			}
			if err := saveContext(r, Context{Name: name, API: r.api, APIKey: r.apiKey}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s as %s of tenant %s; context %q is current.\n",
				r.api, me.GetPrincipal().GetName(), me.GetTenant().GetName(), name)
			return nil
		},
	}
	sso.add(cmd)
	return cmd
}

// saveContext saves c, replacing the context of its name, and makes it current.
func saveContext(r *Resolver, c Context) error {
	dir, err := r.Dir()
	if err != nil {
		return err
	}
	cs, err := LoadContexts(dir)
	if err != nil {
		return err
	}
	cs.Put(c)
	cs.Current = c.Name
	return SaveContexts(dir, cs)
}

func logoutCommand(o *Options) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget a saved context and its API key, ending its session",
		Long: `Remove the context --context (default the current one) from contexts.yaml. A context of a
sign-in (login --sso) ends its session first (auth/signOut); the context is removed even when
the API cannot be reached or the session had already ended.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, cs, err := o.Resolver.contexts()
			if err != nil {
				return err
			}
			name := o.Resolver.context
			if name == "" {
				name = cs.Current
			}
			c, ok := cs.Find(name)
			if name == "" || !ok {
				return usageError(fmt.Errorf("no context %q to log out of", name))
			}
			if c.SessionToken != "" {
				if err := signOut(cmd.Context(), o, c); err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "The session of context %q was not ended (it ends by itself): %v\n", name, oneLine(err.Error()))
				}
			}
			cs.Remove(name)
			if err := SaveContexts(dir, cs); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Context %q removed.\n", name)
			return nil
		},
	}
}

func contextCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "context",
		Short: "List the saved contexts or choose the current one",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the saved contexts; * marks the current one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, cs, err := o.Resolver.contexts()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 3, ' ', 0)
			fmt.Fprintln(tw, "CURRENT\tNAME\tAPI\tCREDENTIAL")
			for _, c := range cs.Contexts {
				mark := ""
				if c.Name == cs.Current {
					mark = "*"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", mark, c.Name, c.API, c.describeCredential(time.Now()))
			}
			return tw.Flush()
		},
	}
	use := &cobra.Command{
		Use:   "use NAME",
		Short: "Make a saved context the current one",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, cs, err := o.Resolver.contexts()
			if err != nil {
				return err
			}
			if _, ok := cs.Find(args[0]); !ok {
				return usageError(fmt.Errorf("no context %q (see `better-compute context list`)", args[0]))
			}
			cs.Current = args[0]
			if err := SaveContexts(dir, cs); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Context %q is current.\n", args[0])
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
			dir, err := o.Resolver.Dir()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			cs, err := LoadContexts(dir)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, c := range cs.Contexts {
				out = append(out, cobra.CompletionWithDesc(c.Name, c.API))
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}
	cmd.AddCommand(list, use)
	return cmd
}
