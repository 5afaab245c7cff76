package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrNoBinaries is returned by FindBinaries when no PostgreSQL server installation is found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, postgres) found")

// ErrTooOld is returned when the PostgreSQL binaries named explicitly are older than MinMajor.
var ErrTooOld = errors.New("PostgreSQL server binaries too old")

// MinMajor is the oldest PostgreSQL major version dev and the tests accept from the system;
// older installations are passed over (or refused when named explicitly).
const MinMajor = 16

// Environment variables read by Find when the corresponding option is empty.
const (
	// EnvSource selects where binaries come from: "fetch", "system" or "auto" (the default).
	EnvSource = "BETTER_COMPUTE_POSTGRES"
	// EnvBinDir names a directory holding initdb and postgres, which is then the only one used.
	EnvBinDir = "BETTER_COMPUTE_POSTGRES_BIN"
	// EnvCache overrides the directory where fetched builds are kept.
	EnvCache = "BETTER_COMPUTE_POSTGRES_CACHE"
)

// Source selects where a private cluster's server binaries come from.
type Source string

const (
	// SourceAuto uses the system's PostgreSQL MinMajor+ when there is one, and otherwise
	// fetches the pinned build.
	SourceAuto Source = "auto"
	// SourceSystem uses only the system's binaries and never downloads.
	SourceSystem Source = "system"
	// SourceFetch always uses the pinned build, ignoring the system's binaries: CI uses it to
	// prove that a machine without PostgreSQL works.
	SourceFetch Source = "fetch"
)

// Binaries locates the PostgreSQL server programs a private cluster needs.
type Binaries struct {
	// Dir holds initdb and postgres.
	Dir string
	// Version is what `postgres --version` reports, such as "17.12".
	Version string
	// Major is the major version, such as 17.
	Major int
	// Fetched is true for the pinned build downloaded into the cache, false for the system's.
	Fetched bool
}

// Initdb is the path of the initdb program.
func (b Binaries) Initdb() string { return filepath.Join(b.Dir, "initdb") }

// Postgres is the path of the postgres server program.
func (b Binaries) Postgres() string { return filepath.Join(b.Dir, "postgres") }

// String says which binaries these are, for the one line dev prints: "PostgreSQL 17.12
// (fetched, /path/bin)".
func (b Binaries) String() string {
	how := "system"
	if b.Fetched {
		how = "fetched"
	}
	return fmt.Sprintf("PostgreSQL %s (%s, %s)", b.Version, how, b.Dir)
}

// FindOptions choose the binaries Find returns. Empty fields fall back to the environment
// variables above, then to the defaults.
type FindOptions struct {
	// BinDir, when set, is the only directory used; a PostgreSQL older than MinMajor there is
	// refused with ErrTooOld.
	BinDir string
	// Source selects system binaries, the pinned build, or either (the default).
	Source Source
	// CacheDir holds fetched builds; empty means DefaultCacheDir().
	CacheDir string
	// Logger receives which binaries were chosen and which were passed over. Nil discards.
	Logger *slog.Logger

	// baseURL replaces the registry's address, for tests.
	baseURL string
}

// FindBinaries is Find with only a bin directory ("" for the usual search), for callers that
// need the programs rather than a cluster.
func FindBinaries(dir string) (Binaries, error) {
	return Find(context.Background(), FindOptions{BinDir: dir})
}

// Find picks the server binaries: the explicit bin directory if any; otherwise, unless the
// source is "fetch", the newest system installation of PostgreSQL MinMajor or newer
// (`pg_config --bindir`, /usr/lib/postgresql/*/bin, PATH); otherwise, unless the source is
// "system", the pinned PostgreSQL build, downloaded once into the cache. Errors name every
// place looked at and what to do.
func Find(ctx context.Context, opts FindOptions) (Binaries, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	source, err := resolveSource(opts.Source)
	if err != nil {
		return Binaries{}, err
	}
	binDir := opts.BinDir
	if binDir == "" {
		binDir = os.Getenv(EnvBinDir)
	}
	if binDir != "" {
		b, err := explicitBinaries(ctx, binDir)
		if err == nil {
			log.Info("PostgreSQL binaries", "version", b.Version, "dir", b.Dir, "from", "configured directory")
		}
		return b, err
	}
	var tried []string
	if source != SourceFetch {
		b, looked, err := systemBinaries(ctx, log)
		if err == nil {
			log.Info("PostgreSQL binaries", "version", b.Version, "dir", b.Dir, "from", "system")
			return b, nil
		}
		tried = looked
		if source == SourceSystem {
			return Binaries{}, fmt.Errorf("%w: looked in %s; install PostgreSQL %d or newer with contrib, or unset %s (now system) to let a pinned PostgreSQL %s be downloaded",
				ErrNoBinaries, strings.Join(tried, ", "), MinMajor, EnvSource, PinnedVersion)
		}
	}
	b, err := fetchPinned(ctx, opts, log)
	if err != nil {
		if len(tried) > 0 {
			return Binaries{}, fmt.Errorf("%w (looked in %s; install PostgreSQL %d or newer with contrib instead)", err, strings.Join(tried, ", "), MinMajor)
		}
		return Binaries{}, err
	}
	log.Info("PostgreSQL binaries", "version", b.Version, "dir", b.Dir, "from", "fetched")
	return b, nil
}

func resolveSource(s Source) (Source, error) {
	if s == "" {
		s = Source(os.Getenv(EnvSource))
	}
	switch s {
	case "", SourceAuto:
		return SourceAuto, nil
	case SourceSystem, SourceFetch:
		return s, nil
	}
	return "", fmt.Errorf("PostgreSQL source %q (%s): want fetch, system or auto", s, EnvSource)
}

// explicitBinaries checks a directory the operator named: it must hold a PostgreSQL MinMajor+.
func explicitBinaries(ctx context.Context, dir string) (Binaries, error) {
	if !hasServer(dir) {
		return Binaries{}, fmt.Errorf("%w in %s (the configured PostgreSQL bin directory, %s)", ErrNoBinaries, dir, EnvBinDir)
	}
	b, err := inspect(ctx, dir)
	if err != nil {
		return Binaries{}, err
	}
	if b.Major < MinMajor {
		return Binaries{}, fmt.Errorf("%w: PostgreSQL %s in %s (the configured bin directory); %d or newer is required: point %s at a newer installation, or unset it to use the system's PostgreSQL %d+ or a downloaded PostgreSQL %s",
			ErrTooOld, b.Version, dir, MinMajor, EnvBinDir, MinMajor, PinnedVersion)
	}
	return b, nil
}

// systemBinaries returns the newest system installation of MinMajor or newer, or the places
// it looked (with the versions too old to use) for the error.
func systemBinaries(ctx context.Context, log *slog.Logger) (Binaries, []string, error) {
	var candidates, tried []string
	if out, err := exec.CommandContext(ctx, "pg_config", "--bindir").Output(); err == nil {
		candidates = append(candidates, strings.TrimSpace(string(out)))
	} else {
		tried = append(tried, "pg_config (not found)")
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return majorOf(dirs[i]) > majorOf(dirs[j]) })
	candidates = append(candidates, dirs...)
	if p, err := exec.LookPath("initdb"); err == nil {
		// PATH often holds symlinks (Debian's /usr/local/bin/initdb); resolve to the real directory
		// so postgres is found beside initdb.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	tried = append(tried, "/usr/lib/postgresql/*/bin", "PATH")
	var best Binaries
	seen := map[string]bool{}
	for _, d := range candidates {
		if seen[d] || !hasServer(d) {
			continue
		}
		seen[d] = true
		b, err := inspect(ctx, d)
		if err != nil {
			log.Warn("skipping PostgreSQL binaries", "dir", d, "err", err)
			tried = append(tried, fmt.Sprintf("%s (%v)", d, err))
			continue
		}
		if b.Major < MinMajor {
			log.Info("skipping PostgreSQL binaries older than the required major", "version", b.Version, "dir", d, "required", MinMajor)
			tried = append(tried, fmt.Sprintf("%s (PostgreSQL %s, too old)", d, b.Version))
			continue
		}
		if b.Major > best.Major {
			best = b
		}
	}
	if best.Dir == "" {
		return Binaries{}, tried, ErrNoBinaries
	}
	return best, tried, nil
}

// versionRE matches `postgres --version`: "postgres (PostgreSQL) 17.12", "... 15.18 (Debian
// 15.18-0+deb12u1)", "... 18beta1".
var versionRE = regexp.MustCompile(`\(PostgreSQL\) ((\d+)(?:\.\d+)?\S*)`)

// inspect reads the version of the postgres program in dir.
func inspect(ctx context.Context, dir string) (Binaries, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	prog := filepath.Join(dir, "postgres")
	out, err := exec.CommandContext(ctx, prog, "--version").CombinedOutput()
	if err != nil {
		return Binaries{}, fmt.Errorf("%s --version: %w: %s", prog, err, strings.TrimSpace(string(out)))
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return Binaries{}, fmt.Errorf("%s --version: unrecognised output %q", prog, strings.TrimSpace(string(out)))
	}
	major, _ := strconv.Atoi(m[2])
	return Binaries{Dir: dir, Version: m[1], Major: major}, nil
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
