package pgcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestFindBinariesNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := FindBinaries(dir)
	if !errors.Is(err, ErrNoBinaries) {
		t.Fatalf("FindBinaries(%q) = %v, want ErrNoBinaries", dir, err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q does not name the directory %s", err, dir)
	}
}

// TestRestartKeepsData starts a cluster, writes, stops it, starts it again from the same
// directory and reads the row back: what dev relies on between runs.
func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	if _, err := FindBinaries(""); err != nil {
		t.Fatalf("this test needs PostgreSQL installed: %v", err)
	}
	// Not t.TempDir: its parent is private, and the server may run as the postgres user.
	tmp, err := os.MkdirTemp("", "bc-pgcluster-") //nolint:usetesting // see above
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	c, err := Start(ctx, Options{Dir: dir, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	execSQL(t, ctx, c.URL("postgres"), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')")
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	c, err = Start(ctx, Options{Dir: dir, Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != "still here" {
		t.Fatalf("after restart: %q, %v", v, err)
	}
	// Password authentication is required on the loopback port.
	bad := strings.Replace(c.URL("postgres"), c.password, "wrong", 1)
	if conn, err := pgx.Connect(ctx, bad); err == nil {
		conn.Close(ctx)
		t.Fatal("connected with a wrong password")
	}
}

func execSQL(t *testing.T, ctx context.Context, url, sql string) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatal(err)
	}
}
