package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/pki/cahash"
)

// TestPKIExportRoot: after pki init, pki export-root writes the root CA (to stdout, or to --out
// readable by all) and pki status shows its pin, with no secret: what a production deployment
// gives its first node (bcd join --ca-file or --ca-cert-hash), which only dev wrote before.
func TestPKIExportRoot(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	pool, err := database.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b, err := pki.Init(t.Context(), pool, "0123456789abcdef0123456789abcdef-test", "export.test")
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runMain(t, "pki", "export-root", "--database-url", url)
	if code != 0 || stdout != string(b.RootPEM()) {
		t.Fatalf("pki export-root: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	out := filepath.Join(t.TempDir(), "root-ca.pem")
	if _, stderr, code := runMain(t, "pki", "export-root", "--database-url", url, "--out", out); code != 0 {
		t.Fatalf("pki export-root --out: exit %d: %s", code, stderr)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, b.RootPEM()) {
		t.Fatalf("--out file: %q, %v", got, err)
	}
	if fi, _ := os.Stat(out); fi.Mode().Perm() != 0o644 {
		t.Errorf("--out mode %o", fi.Mode().Perm())
	}
	pin, _ := cahash.OfPEM(got)
	stdout, stderr, code = runMain(t, "pki", "status", "--database-url", url)
	if code != 0 || !strings.Contains(stdout, "root CA pin:  "+pin) || pin != b.RootCertHash() {
		t.Errorf("pki status: exit %d, pin %s:\n%s%s", code, pin, stdout, stderr)
	}
}
