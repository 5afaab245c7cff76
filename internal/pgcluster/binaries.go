package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ErrNoBinaries is returned by FindBinaries when no PostgreSQL server installation is found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) found")

// Binaries locates the PostgreSQL server programs a private cluster needs.
type Binaries struct {
	// Dir holds initdb and postgres.
	Dir string
}

// Initdb is the path of the initdb program.
func (b Binaries) Initdb() string { return filepath.Join(b.Dir, "initdb") }

// Postgres is the path of the postgres server program.
func (b Binaries) Postgres() string { return filepath.Join(b.Dir, "postgres") }

// FindBinaries looks for initdb and postgres, in this order: the directory given (if any),
// `pg_config --bindir`, the newest /usr/lib/postgresql/*/bin, and PATH. The error names every
// place it looked so an operator can see what to install.
func FindBinaries(dir string) (Binaries, error) {
	var tried []string
	if dir != "" {
		if hasServer(dir) {
			return Binaries{Dir: dir}, nil
		}
		return Binaries{}, fmt.Errorf("%w in %s (the configured PostgreSQL bin directory)", ErrNoBinaries, dir)
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		d := strings.TrimSpace(string(out))
		if hasServer(d) {
			return Binaries{Dir: d}, nil
		}
		tried = append(tried, d+" (pg_config --bindir)")
	} else {
		tried = append(tried, "pg_config (not found)")
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	for _, d := range dirs {
		if hasServer(d) {
			return Binaries{Dir: d}, nil
		}
	}
	tried = append(tried, "/usr/lib/postgresql/*/bin")
	if p, err := exec.LookPath("initdb"); err == nil {
		// PATH often holds symlinks (Debian's /usr/local/bin/initdb); resolve to the real directory
		// so postgres is found beside initdb.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if d := filepath.Dir(p); hasServer(d) {
			return Binaries{Dir: d}, nil
		}
	}
	tried = append(tried, "PATH")
	return Binaries{}, fmt.Errorf("%w: looked in %s; install PostgreSQL 15 or newer with contrib (Debian: apt-get install postgresql postgresql-contrib), or set BETTER_COMPUTE_DATABASE_URL",
		ErrNoBinaries, strings.Join(tried, ", "))
}

func hasServer(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// majorOf extracts the version from /usr/lib/postgresql/<major>/bin, 0 when it has none.
func majorOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}
