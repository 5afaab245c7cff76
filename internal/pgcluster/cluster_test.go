package pgcluster

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	dir := clusterDir(t)
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

// TestFetchedPostgres17 runs the pinned build, as a machine without PostgreSQL would: fetched
// into the shared cache, run as nobody when root (the account a machine without a PostgreSQL
// package has), with the contrib extension the schema needs.
func TestFetchedPostgres17(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: clusterDir(t), Ephemeral: true, Source: SourceFetch,
		accounts: []string{"bc-no-such-account", "nobody"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	if b := c.Binaries(); !b.Fetched || b.Major != 17 || !strings.HasPrefix(PinnedVersion, b.Version) {
		t.Errorf("binaries %v, want the fetched %s", b, PinnedVersion)
	}
	execSQL(t, ctx, c.URL("postgres"), "CREATE EXTENSION btree_gist")
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var version string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(version, "17") {
		t.Errorf("server_version %s, want 17", version)
	}
	if os.Geteuid() == 0 {
		fi, err := os.Stat(filepath.Join(c.Dir(), "data"))
		if err != nil {
			t.Fatal(err)
		}
		nobody, err := user.Lookup("nobody")
		if err != nil {
			t.Fatal(err)
		}
		if uid := strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10); uid != nobody.Uid {
			t.Errorf("data directory owned by uid %s, want nobody (%s)", uid, nobody.Uid)
		}
	}
}

// clusterDir is a directory for a cluster. Not t.TempDir: its parent is private, and the
// server may run as another account.
func clusterDir(t *testing.T) string {
	t.Helper()
	tmp, err := os.MkdirTemp("", "bc-pgcluster-") //nolint:usetesting // see above
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(tmp, "cluster")
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

func TestStartRefusesAClusterOfAnotherMajor(t *testing.T) {
	t.Parallel()
	dir := clusterDir(t)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "PG_VERSION"), []byte("15\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{Dir: dir, Source: SourceFetch})
	if err == nil {
		_ = c.Stop(ctx)
		t.Fatal("started PostgreSQL 17 on a cluster made by 15")
	}
	for _, want := range []string{"made by PostgreSQL 15", "--fresh", EnvBinDir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
