package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/internal/release"
)

// Bounds on the small files of a release.
const (
	maxChecksumsBytes = 1 << 20  // SHA256SUMS (release.ParseChecksums takes at most this)
	maxSignatureBytes = 16 << 10 // SHA256SUMS.minisig (minisign's own limit is about 11 KiB)
	// maxUpgradeRedirects bounds the redirects a download follows, each under the release URL.
	maxUpgradeRedirects = 5
)

// stage fetches and verifies release version's bcd for this platform and leaves it, executable,
// at Path + NextSuffix; it returns that path and the version the binary reports. In order:
// SHA256SUMS and SHA256SUMS.minisig (bounded) are fetched; the signature must verify with one of
// Keys and its trusted comment must be release.TrustedComment(version), so that a signature of
// another release cannot be replayed; only then is SHA256SUMS read for
// bcd_VERSION_GOOS_GOARCH, which is fetched (at most MaxBytes) into a 0600 file, hashed as it is
// written, made executable only when its SHA-256 matches, synced, and run with "version", which
// must report version. Any failure removes the file and says what did not verify.
func (u *Upgrader) stage(ctx context.Context, version string) (string, string, error) {
	timeout := u.Timeout
	if timeout <= 0 {
		timeout = DefaultUpgradeTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	fail := func(format string, args ...any) (string, string, error) {
		return "", "", fmt.Errorf("upgrade to %s: %s; nothing replaced", version, fmt.Sprintf(format, args...))
	}
	client := u.client()
	sumsURL, sigURL := u.Release.URL(version, release.ChecksumsFile), u.Release.URL(version, release.SignatureFile)
	var sums, sig bytes.Buffer
	if _, err := fetch(ctx, client, sumsURL, maxChecksumsBytes, &sums); err != nil {
		return fail("%v", err)
	}
	if _, err := fetch(ctx, client, sigURL, maxSignatureBytes, &sig); err != nil {
		return fail("%v", err)
	}
	if err := u.verify(version, sums.Bytes(), sig.Bytes()); err != nil {
		return fail("%s does not verify: %v", sumsURL, err)
	}
	checksums, err := release.ParseChecksums(sums.Bytes())
	if err != nil {
		return fail("%s: %v", sumsURL, err)
	}
	name := release.ArtifactName("bcd", version, runtime.GOOS, runtime.GOARCH)
	want, ok := checksums[name]
	if !ok {
		return fail("the signed %s lists no %s: the release has no bcd for this platform", sumsURL, name)
	}

	next := u.Path + NextSuffix
	// A file left by an earlier attempt is never reused; O_EXCL then refuses anything that
	// appears in its place (a symlink included).
	if err := os.Remove(next); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail("remove the stale %s: %v", next, err)
	}
	f, err := os.OpenFile(next, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fail("%v", err)
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(next)
		}
	}()
	binURL := u.Release.URL(version, name)
	h := sha256.New()
	if _, err := fetch(ctx, client, binURL, u.maxBytes(), io.MultiWriter(f, h)); err != nil {
		return fail("%v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fail("checksum mismatch for %s: its sha256 is %s, the signed %s says %s", binURL, got, release.ChecksumsFile, want)
	}
	if err := f.Chmod(0o755); err != nil {
		return fail("%v", err)
	}
	if err := f.Sync(); err != nil {
		return fail("%v", err)
	}
	if err := f.Close(); err != nil {
		return fail("%v", err)
	}
	if err := syncDir(filepath.Dir(next)); err != nil {
		return fail("%v", err)
	}
	reported, err := runVersion(ctx, next)
	if err != nil {
		return fail("the new binary %v", err)
	}
	if reported != version {
		return fail("the new binary says it is version %q, not %q", reported, version)
	}
	keep = true
	return next, reported, nil
}

// verify checks sig over sums with any of Keys, and that its trusted comment is the one of
// version's release.
func (u *Upgrader) verify(version string, sums, sig []byte) error {
	var errs []error
	for _, k := range u.Keys {
		comment, err := release.Verify(k, sums, sig)
		if errors.Is(err, release.ErrWrongKey) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("key %s: %w", k.ID, err))
			continue
		}
		if want := release.TrustedComment(version); comment != want {
			return fmt.Errorf("it is signed by key %s for another release: its trusted comment is %q, not %q", k.ID, comment, want)
		}
		return nil
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	ids := make([]string, len(u.Keys))
	for i, k := range u.Keys {
		ids[i] = k.ID.String()
	}
	return fmt.Errorf("signed by %s, none of this node's release keys (%s)", signerOf(sig), strings.Join(ids, ", "))
}

// signerOf names the key a minisign signature says it is from (its key id), for a message
// when it is none of the node's keys.
func signerOf(sig []byte) string {
	lines := strings.Split(string(sig), "\n")
	if len(lines) < 2 {
		return "an unreadable signature"
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(lines[1]))
	if err != nil || len(b) < 2+len(release.KeyID{}) {
		return "an unreadable signature"
	}
	var id release.KeyID
	copy(id[:], b[2:])
	return "key " + id.String()
}

// fetch fetches rawURL into w, at most limit bytes; it returns how many it wrote.
func fetch(ctx context.Context, client *http.Client, rawURL string, limit int64, w io.Writer) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, err
	}
	res, err := client.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("fetch %s: %w", rawURL, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("fetch %s: %s", rawURL, res.Status)
	}
	if res.ContentLength > limit {
		return 0, fmt.Errorf("%s is %d bytes, more than %d", rawURL, res.ContentLength, limit)
	}
	n, err := io.Copy(w, io.LimitReader(res.Body, limit+1))
	if err != nil {
		return n, fmt.Errorf("fetch %s: %w", rawURL, err)
	}
	if n > limit {
		return n, fmt.Errorf("%s is more than %d bytes", rawURL, limit)
	}
	return n, nil
}

// client is Client with redirects kept under the release URL.
func (u *Upgrader) client() *http.Client {
	c := &http.Client{}
	if u.Client != nil {
		*c = *u.Client
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) > maxUpgradeRedirects {
			return fmt.Errorf("more than %d redirects", maxUpgradeRedirects)
		}
		if err := u.Release.covers(req.URL); err != nil {
			return fmt.Errorf("redirected to %s, %w", req.URL.Redacted(), err)
		}
		return nil
	}
	return c
}

func (u *Upgrader) maxBytes() int64 {
	if u.MaxBytes <= 0 {
		return DefaultMaxBinary
	}
	return u.MaxBytes
}

// runVersion runs "path version" with nothing of the daemon's environment and returns the
// version it reports ("bcd v1.2.3 (build)": the second word). A binary that does not run here,
// or is not bcd, fails.
func runVersion(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var out bytes.Buffer
	for attempt := 1; ; attempt++ {
		out.Reset()
		cmd := exec.CommandContext(ctx, path, "version")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Env = []string{"PATH=" + ExecPath}
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
		return "", fmt.Errorf("does not run (%w): %s", err, strings.TrimSpace(firstLine(out.String())))
	}
	line := strings.TrimSpace(firstLine(out.String()))
	f := strings.Fields(line)
	if len(f) < 2 || f[0] != "bcd" {
		return "", fmt.Errorf("is not bcd: its version command says %q", line)
	}
	return f[1], nil
}

// syncDir makes a rename or a new file in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
