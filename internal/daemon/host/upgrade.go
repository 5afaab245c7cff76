package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
)

// Upgrade limits.
const (
	// DefaultMaxBinary bounds the size of a binary an upgrade downloads.
	DefaultMaxBinary = 512 << 20
	// DefaultUpgradeTimeout bounds an upgrade's download, redirects included (the command's
	// deadline bounds it too).
	DefaultUpgradeTimeout = 5 * time.Minute
	// maxUpgradeRedirects bounds the redirects a download follows, each under a source too.
	maxUpgradeRedirects = 5
	// maxVersion bounds the version an upgrade's payload names.
	maxVersion = command.MaxVersion
)

// Upgrader replaces the daemon's binary and restarts it: the "upgrade" command, which bcd has
// only when run with --allow-upgrade. Until releases are signed, what it trusts is where a
// binary comes from: it fetches only from Sources, and puts in place only bytes that match the
// payload's SHA-256.
type Upgrader struct {
	// Path is the binary to replace; bcd passes its own executable. Its directory must be
	// writable: the new binary is written beside it and renamed over it.
	Path string
	// Sources are the URL prefixes an upgrade may fetch from (and be redirected to); with none,
	// every upgrade is refused.
	Sources []UpgradeSource
	// Client fetches binaries; http.DefaultClient's settings when nil. Its CheckRedirect is
	// replaced by one that follows only redirects under Sources.
	Client *http.Client
	// MaxBytes bounds a download; DefaultMaxBinary when 0.
	MaxBytes int64
	// Timeout bounds a download; DefaultUpgradeTimeout when 0.
	Timeout time.Duration
	// Args and Env are what the new binary is started with; the running process's when nil.
	Args, Env []string
	// Exec replaces the running process with the binary at path (syscall.Exec when nil). Tests
	// record the call instead.
	Exec   func(path string, args, env []string) error
	Logger *slog.Logger

	mu      sync.Mutex
	replace bool // a binary was replaced and the restart is due
}

// Upgrade downloads a binary and, when it matches its checksum and runs, renames it over Path.
// The payload is (as JSON)
//
//	{"url": "https://releases.example.com/bcd-v1.2.3-linux-amd64", "sha256": "<64 hex digits>",
//	 "version": "v1.2.3"}
//
// with version optional: when given, the new binary's "version" output must name it. The url
// must be under one of Sources. The download (at most MaxBytes, within Timeout) goes to a
// private temporary file beside Path, and only bytes whose SHA-256 matches are made executable,
// synced, run with "version" and renamed over Path. The restart happens in Restart, once the
// result is recorded, so that a re-delivery of the command after the restart is answered from
// the record instead of upgrading again.
func (u *Upgrader) Upgrade(ctx context.Context, payload *daemonv1.UpgradePayload) (*structpb.Struct, error) {
	rawURL, sum, version := payload.GetUrl(), strings.ToLower(payload.GetSha256()), payload.GetVersion()
	if rawURL == "" || sum == "" {
		msg := `upgrade: the payload needs "url" and "sha256" (the binary to fetch and its SHA-256)`
		if version != "" && len(version) <= maxVersion {
			msg += fmt.Sprintf("; it names only version %q, and this daemon does not know where to fetch that", version)
		}
		return nil, errors.New(msg)
	}
	if b, err := hex.DecodeString(sum); err != nil || len(b) != sha256.Size {
		return nil, errors.New("upgrade: sha256 is not 64 hex digits")
	}
	if len(version) > maxVersion {
		return nil, fmt.Errorf("upgrade: version is longer than %d bytes", maxVersion)
	}
	if len(rawURL) > MaxUpgradeURL {
		return nil, fmt.Errorf("upgrade: url is longer than %d bytes; nothing fetched", MaxUpgradeURL)
	}
	pu, err := url.Parse(rawURL)
	if err == nil {
		err = checkUpgradeURL(pu, u.Sources)
	}
	if err != nil {
		return nil, fmt.Errorf("upgrade: url %q: %w; nothing fetched", rawURL, err)
	}
	if u.Path == "" {
		return nil, errors.New("upgrade: this daemon does not know its own binary")
	}
	u.mu.Lock() // one upgrade at a time
	defer u.mu.Unlock()

	tmp, n, err := u.fetch(ctx, rawURL, sum)
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp) // after the rename there is nothing left to remove
	reported, err := u.check(ctx, tmp, version)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, u.Path); err != nil {
		return nil, fmt.Errorf("upgrade: replace %s: %w", u.Path, err)
	}
	if d, err := os.Open(filepath.Dir(u.Path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	u.replace = true
	u.logger().Info("upgrade: replaced the daemon binary; restarting once the result is recorded",
		"path", u.Path, "sha256", sum, "version", reported)
	return structpb.NewStruct(map[string]any{
		"path": u.Path, "sha256": sum, "bytes": float64(n), "version": reported, "restarting": true,
	})
}

// fetch downloads url beside Path, checking its size and SHA-256; it returns the temporary
// file, executable only once its checksum matched.
func (u *Upgrader) fetch(ctx context.Context, rawURL, sum string) (string, int64, error) {
	client := &http.Client{}
	if u.Client != nil {
		*client = *u.Client
	}
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > maxUpgradeRedirects {
			return fmt.Errorf("more than %d redirects", maxUpgradeRedirects)
		}
		if err := checkUpgradeURL(req.URL, u.Sources); err != nil {
			return fmt.Errorf("redirected to %s: %w", req.URL.Redacted(), err)
		}
		return nil
	}
	timeout := u.Timeout
	if timeout <= 0 {
		timeout = DefaultUpgradeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	max := u.MaxBytes
	if max <= 0 {
		max = DefaultMaxBinary
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", 0, fmt.Errorf("upgrade: %w", err)
	}
	res, err := client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("upgrade: fetch: %w; nothing replaced", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", 0, fmt.Errorf("upgrade: fetch %s: %s; nothing replaced", rawURL, res.Status)
	}
	if res.ContentLength > max {
		return "", 0, fmt.Errorf("upgrade: %s is %d bytes, larger than %d; nothing replaced", rawURL, res.ContentLength, max)
	}
	// CreateTemp makes the file 0600: nothing runs it before the checksum matched.
	f, err := os.CreateTemp(filepath.Dir(u.Path), "."+filepath.Base(u.Path)+".upgrade-*")
	if err != nil {
		return "", 0, fmt.Errorf("upgrade: %w", err)
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(res.Body, max+1))
	if err != nil {
		return "", 0, fmt.Errorf("upgrade: fetch %s: %w", rawURL, err)
	}
	if n > max {
		return "", 0, fmt.Errorf("upgrade: %s is larger than %d bytes", rawURL, max)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return "", 0, fmt.Errorf("upgrade: checksum mismatch for %s: got sha256 %s, want %s; nothing replaced", rawURL, got, sum)
	}
	if err := f.Chmod(0o755); err != nil {
		return "", 0, fmt.Errorf("upgrade: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", 0, fmt.Errorf("upgrade: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", 0, fmt.Errorf("upgrade: %w", err)
	}
	keep = true
	return f.Name(), n, nil
}

// check runs the new binary's "version" command, which must succeed (and name version, when
// given), so that a binary for another platform or a broken one is never put in place.
func (u *Upgrader) check(ctx context.Context, path, version string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var out bytes.Buffer
	for attempt := 1; ; attempt++ {
		out.Reset()
		cmd := exec.CommandContext(ctx, path, "version")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Env = []string{"PATH=" + ExecPath} // nothing of the daemon's environment
		cmd.WaitDelay = time.Second
		err := cmd.Run()
		if err == nil {
			break
		}
		// A process forked elsewhere in the daemon while the file was open for writing holds it
		// until that child execs: "text file busy" passes.
		if errors.Is(err, syscall.ETXTBSY) && attempt < 5 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
			}
			continue
		}
		return "", fmt.Errorf("upgrade: the new binary does not run (%w): %s; nothing replaced", err, strings.TrimSpace(firstLine(out.String())))
	}
	line := strings.TrimSpace(firstLine(out.String()))
	// "bcd v1.2.3 (build)": the version is the second word.
	reported := line
	if f := strings.Fields(line); len(f) >= 2 {
		reported = f[1]
	}
	if version != "" && reported != version {
		return "", fmt.Errorf("upgrade: the new binary is version %q, not %q; nothing replaced", reported, version)
	}
	return reported, nil
}

// Restart replaces the process with the new binary when an upgrade replaced it. It returns
// only if that fails.
func (u *Upgrader) Restart() {
	u.mu.Lock()
	due := u.replace
	u.replace = false
	u.mu.Unlock()
	if !due {
		return
	}
	args, env, run := u.Args, u.Env, u.Exec
	if args == nil {
		args = os.Args
	}
	if env == nil {
		env = os.Environ()
	}
	if run == nil {
		run = syscall.Exec
	}
	u.logger().Info("upgrade: restarting with the new binary", "path", u.Path)
	if err := run(u.Path, args, env); err != nil {
		u.logger().Error("upgrade: restart with the new binary; the old one keeps running until bcd restarts", "path", u.Path, "err", err)
	}
}

func (u *Upgrader) logger() *slog.Logger {
	if u.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return u.Logger
}
