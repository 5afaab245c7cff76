package pgcluster

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeBinDir is a bin directory whose postgres --version prints line.
func fakeBinDir(t *testing.T, line string) string {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\necho '" + line + "'\n"
	for _, name := range []string{"initdb", "postgres"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestExplicitBinDirVersionPolicy(t *testing.T) {
	t.Parallel()
	old := fakeBinDir(t, "postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)")
	_, err := Find(context.Background(), FindOptions{BinDir: old})
	if !errors.Is(err, ErrTooOld) {
		t.Fatalf("Find(%s) = %v, want ErrTooOld", old, err)
	}
	for _, want := range []string{"15.18", old, EnvBinDir, "16 or newer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}

	for line, want := range map[string]Binaries{
		"postgres (PostgreSQL) 16.4":    {Version: "16.4", Major: 16},
		"postgres (PostgreSQL) 18beta1": {Version: "18beta1", Major: 18},
	} {
		dir := fakeBinDir(t, line)
		want.Dir = dir
		if got, err := Find(context.Background(), FindOptions{BinDir: dir, Source: SourceFetch}); err != nil || got != want {
			t.Errorf("Find(%q) = %+v, %v, want %+v", line, got, err, want)
		}
	}
}

func TestFindRefusesUnknownSource(t *testing.T) {
	t.Parallel()
	if _, err := Find(context.Background(), FindOptions{Source: "apt"}); err == nil || !strings.Contains(err.Error(), EnvSource) {
		t.Fatalf("Find(source apt) = %v, want an error naming %s", err, EnvSource)
	}
}

func TestServerAccountFallsBack(t *testing.T) {
	t.Parallel()
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no nobody account on this machine")
	}
	cred, err := lookupAccount([]string{"bc-no-such-account", "root", "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cred.Uid; nobody.Uid != strconv.FormatUint(uint64(got), 10) {
		t.Errorf("ran as uid %d, want nobody (%s)", got, nobody.Uid)
	}
	if _, err := lookupAccount([]string{"bc-no-such-account"}); err == nil || !strings.Contains(err.Error(), "bc-no-such-account") {
		t.Errorf("lookupAccount without an account = %v, want an error naming it", err)
	}
}
