package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/pki"
)

func newPKICommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pki",
		Short: "Manage the machine PKI: certificate authorities and gateway certificates",
		Long: `The machine PKI gives nodes, gateways and internal services their SPIFFE identities. Its
certificate authorities live in the database with their keys sealed under the deployment secret,
so init, issue-gateway and rotate-node-ca need the configuration's secret; status and
export-root do not.`,
	}
	cmd.AddCommand(newPKIInitCommand(g), newPKIIssueGatewayCommand(g), newPKIRotateNodeCACommand(g), newPKIStatusCommand(g),
		newPKIExportRootCommand(g))
	return cmd
}

// openPKIDatabase loads the configuration (for the secret) and opens the database named by
// --database-url, else by database.url of the configuration.
func openPKIDatabase(cmd *cobra.Command, g *globals, urlFlag string) (*config.Config, *pgxpool.Pool, error) {
	cfg, err := config.Load(g.configPath, os.Environ())
	if err != nil {
		return nil, nil, err
	}
	url := urlFlag
	if url == "" {
		if err := cfg.RequireDatabase(); err != nil {
			return nil, nil, err
		}
		url = cfg.Database.URL
	}
	pool, err := database.Open(cmd.Context(), url)
	if err != nil {
		return nil, nil, err
	}
	return cfg, pool, nil
}

func newPKIInitCommand(g *globals) *cobra.Command {
	var url, trustDomain string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the root, node and internal CAs and the JoinService key",
		Long: `Create the deployment's PKI for a trust domain: a root CA (10 years), a node CA and an internal
CA (2 years), and the JoinService key, sealed under the configuration's secret. Running it again
with the same trust domain changes nothing; another trust domain is an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, pool, err := openPKIDatabase(cmd, g, url)
			if err != nil {
				return err
			}
			defer pool.Close()
			if trustDomain == "" {
				trustDomain = cfg.TrustDomain
			}
			if trustDomain == "" {
				return errors.New("--trust-domain is required (or set trustDomain in the configuration)")
			}
			_, statusErr := pki.Status(cmd.Context(), pool)
			b, err := pki.Init(cmd.Context(), pool, cfg.Secret, trustDomain)
			if err != nil {
				return err
			}
			if statusErr == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "the PKI is already initialised for trust domain %s; nothing changed\n", b.TrustDomain())
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "initialised the PKI for trust domain %s\n", b.TrustDomain())
			}
			return nil
		},
	}
	databaseURLFlag(cmd, &url)
	cmd.Flags().StringVar(&trustDomain, "trust-domain", "", "SPIFFE trust domain, a lower-case DNS name (default trustDomain of the configuration)")
	return cmd
}

func newPKIIssueGatewayCommand(g *globals) *cobra.Command {
	var url, region, id, outCert, outKey string
	var dnsNames, ipFlags []string
	cmd := &cobra.Command{
		Use:   "issue-gateway",
		Short: "Issue a gateway serving certificate and key",
		Long: `Issue a serving certificate for a gateway, signed by the root CA that daemons trust, with the
SPIFFE ID spiffe://<trust domain>/gateway/<region>/<id> and the DNS names and IP addresses
daemons dial. Writes the certificate followed by the root CA (PEM; a node joining with only the
root's pin, bcd join --ca-cert-hash, finds the root there) to --out-cert and a new private key
(PKCS #8 PEM, mode 0600) to --out-key, replacing each file atomically.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ips []net.IP
			for _, s := range ipFlags {
				ip := net.ParseIP(strings.TrimSpace(s))
				if ip == nil {
					return fmt.Errorf("--ip %q is not an IP address", s)
				}
				ips = append(ips, ip)
			}
			cfg, pool, err := openPKIDatabase(cmd, g, url)
			if err != nil {
				return err
			}
			defer pool.Close()
			b, err := pki.Load(cmd.Context(), pool, cfg.Secret)
			if err != nil {
				return err
			}
			certPEM, keyPEM, err := b.IssueGateway(region, id, dnsNames, ips)
			if err != nil {
				return err
			}
			if err := writeFileAtomic(outKey, keyPEM, 0o600); err != nil {
				return err
			}
			if err := writeFileAtomic(outCert, certPEM, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote the certificate of spiffe://%s/gateway/%s/%s to %s (valid until %s), its key to %s\n",
				b.TrustDomain(), region, id, outCert, time.Now().Add(pki.GatewayTTL).UTC().Format(time.RFC3339), outKey)
			return nil
		},
	}
	databaseURLFlag(cmd, &url)
	cmd.Flags().StringVar(&region, "region", "", "the gateway's region")
	cmd.Flags().StringVar(&id, "id", "", "the gateway's id within its region")
	cmd.Flags().StringSliceVar(&dnsNames, "dns", nil, "DNS names daemons dial, comma-separated or repeated")
	cmd.Flags().StringSliceVar(&ipFlags, "ip", nil, "IP addresses daemons dial, comma-separated or repeated")
	cmd.Flags().StringVar(&outCert, "out-cert", "", "file to write the certificate to")
	cmd.Flags().StringVar(&outKey, "out-key", "", "file to write the private key to (mode 0600)")
	for _, f := range []string{"region", "id", "out-cert", "out-key"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

// writeFileAtomic writes data to a new file beside path with mode perm and renames it over path,
// so a reader sees the old file or the new one, and a key is never readable by others.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(f.Name()) }() // fails harmlessly after the rename
	if err := f.Chmod(perm); err != nil {
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func newPKIRotateNodeCACommand(g *globals) *cobra.Command {
	var url string
	var overlap time.Duration
	cmd := &cobra.Command{
		Use:   "rotate-node-ca",
		Short: "Make a new node CA the issuer; accept the old ones until the overlap ends",
		Long: `Make a new node CA, signed by the root, the issuer of node certificates. Older node CAs stay
accepted for --overlap, time for every node to renew its certificate, then are retired;
--overlap 0 retires them at once. Running processes pick the new CA up when they reload the PKI.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, pool, err := openPKIDatabase(cmd, g, url)
			if err != nil {
				return err
			}
			defer pool.Close()
			if _, err := pki.RotateNodeCA(cmd.Context(), pool, cfg.Secret, overlap); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "rotated the node CA; older node CAs are accepted until %s\n",
				time.Now().Add(overlap).UTC().Format(time.RFC3339))
			return nil
		},
	}
	databaseURLFlag(cmd, &url)
	cmd.Flags().DurationVar(&overlap, "overlap", 48*time.Hour, "how long older node CAs stay accepted")
	return cmd
}

func newPKIStatusCommand(g *globals) *cobra.Command {
	var url string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the trust domain and every certificate authority",
		Long: `Show the trust domain, the root CA's pin (what bcd join --ca-cert-hash takes, also printed
by joinTokens/create), and every authority with its kind, subject, expiry and state, then a
warning for each authority in use that expires within 30 days. --json prints the same as JSON.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := g.databaseURL(url)
			if err != nil {
				return err
			}
			pool, err := database.Open(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer pool.Close()
			st, err := pki.Status(cmd.Context(), pool)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			fmt.Fprintf(out, "trust domain: %s\nroot CA pin:  %s  (bcd join --ca-cert-hash)\n\n", st.TrustDomain, st.RootCertHash)
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tID\tSUBJECT\tNOT AFTER\tSTATE")
			for _, a := range st.Authorities {
				notAfter, state := "-", "issuer"
				if a.NotAfter != nil {
					notAfter = a.NotAfter.UTC().Format(time.RFC3339)
				}
				switch {
				case a.Retired:
					state = "retired " + a.RetiredAt.UTC().Format(time.RFC3339)
				case !a.Issuer:
					state = "accepted until " + a.RetiredAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.Kind, a.ID, a.Subject, notAfter, state)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, w := range st.Warnings {
				fmt.Fprintf(out, "warning: %s\n", w)
			}
			return nil
		},
	}
	databaseURLFlag(cmd, &url)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newPKIExportRootCommand(g *globals) *cobra.Command {
	var url, out string
	cmd := &cobra.Command{
		Use:   "export-root [--out root-ca.pem]",
		Short: "Write the root CA certificate (PEM), for bcd join --ca-file",
		Long: `Write the deployment's root CA certificate, PEM, to stdout or to --out (mode 0644, replaced
atomically): the file bcd join --ca-file takes, for those who copy files to their nodes rather
than give them the root's pin (bcd join --ca-cert-hash, shown by pki status). The certificate is
public; this needs the database, not the secret.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := g.databaseURL(url)
			if err != nil {
				return err
			}
			pool, err := database.Open(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer pool.Close()
			root, err := pki.RootPEM(cmd.Context(), pool)
			if err != nil {
				return err
			}
			if out == "" {
				_, err := cmd.OutOrStdout().Write(root)
				return err
			}
			if err := writeFileAtomic(out, root, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote the root CA to %s\n", out)
			return nil
		},
	}
	databaseURLFlag(cmd, &url)
	cmd.Flags().StringVar(&out, "out", "", "file to write; stdout when empty")
	return cmd
}
