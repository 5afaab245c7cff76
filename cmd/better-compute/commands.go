package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/buildinfo"
	"github.com/better-compute/better-compute/database"
	"github.com/better-compute/better-compute/devmode"
	"github.com/better-compute/better-compute/migrate"
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "better-compute",
		Short: "The Better Compute control plane",
		Long: `Better Compute is a control plane for fleets of compute hosts. Operators run it on their
own PostgreSQL; tenants lease capacity through its API; a daemon on every host dials out to
a gateway and does what it is told.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand(), newMigrateCommand(), newDevCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "better-compute %s (%s)\n", buildinfo.Version, buildinfo.Build())
			return nil
		},
	}
}

// databaseURLFlag adds --database-url, defaulting to BETTER_COMPUTE_DATABASE_URL.
func databaseURLFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "database-url", os.Getenv("BETTER_COMPUTE_DATABASE_URL"),
		"PostgreSQL URL (env BETTER_COMPUTE_DATABASE_URL)")
}

func newMigrateCommand() *cobra.Command {
	var url string
	var status, dryRun bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations",
		Long: `Apply pending schema migrations, each in its own transaction, under an advisory lock so
several processes can run it at once. --status lists every migration and whether it is applied;
--dry-run lists what would be applied and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			pool, err := database.Open(ctx, url)
			if err != nil {
				return err
			}
			defer pool.Close()
			m, err := migrate.New(pool)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case status:
				states, err := m.Status(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "MIGRATION\tSTATE\tAPPLIED AT")
				for _, s := range states {
					state, at := "pending", ""
					if s.Applied {
						state, at = "applied", s.AppliedAt.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", s, state, at)
				}
				return tw.Flush()
			case dryRun:
				pending, err := m.Pending(ctx)
				if err != nil {
					return err
				}
				if len(pending) == 0 {
					fmt.Fprintln(out, "schema is current; nothing to apply")
				}
				for _, p := range pending {
					fmt.Fprintf(out, "would apply %s\n", p)
				}
				return nil
			}
			applied, err := m.Up(ctx)
			for _, a := range applied {
				fmt.Fprintf(out, "applied %s\n", a)
			}
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(out, "schema is current; nothing to apply")
			}
			return nil
		},
	}
	databaseURLFlag(cmd, &url)
	cmd.Flags().BoolVar(&status, "status", false, "list migrations and whether each is applied")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list pending migrations without applying them")
	cmd.MarkFlagsMutuallyExclusive("status", "dry-run")
	return cmd
}

func newDevCommand() *cobra.Command {
	opts := devmode.Options{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a whole deployment locally on a private PostgreSQL",
		Long: `Run every available role in one process. Without a database URL it starts a private
PostgreSQL from the binaries installed on this machine, kept between runs under the user cache
directory (--fresh starts over). It prints the API URL as a line "API: <url>".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			opts.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			return devmode.Run(cmd.Context(), opts)
		},
	}
	databaseURLFlag(cmd, &opts.DatabaseURL)
	cmd.Flags().StringVar(&opts.Host, "host", "127.0.0.1", "API listen host")
	cmd.Flags().IntVar(&opts.Port, "port", 3000, "API listen port (0 picks a free one)")
	cmd.Flags().StringVar(&opts.ClusterDir, "data-dir", "", "private PostgreSQL directory (default under the user cache directory)")
	cmd.Flags().BoolVar(&opts.Fresh, "fresh", false, "delete the private PostgreSQL first")
	return cmd
}
