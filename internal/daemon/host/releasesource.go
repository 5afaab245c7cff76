package host

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/better-compute/better-compute/internal/release"
)

// Release source limits.
const (
	// MaxReleaseKeys bounds how many --release-key files bcd takes.
	MaxReleaseKeys = 8
	// maxReleaseURL bounds the length of --release-url and of every URL fetched under it.
	maxReleaseURL = 2048
	// maxKeyFile bounds a --release-key file (a minisign.pub is about 100 bytes).
	maxKeyFile = 4096
)

// ReleaseSource is where bcd fetches releases from (bcd run --release-url): release VERSION is
// the directory BASE/VERSION/. It is http or https (what it serves is trusted only once its
// signature verifies), names no user, query or fragment, and its path is plain segments. Every
// download and redirect must stay under it: the same scheme and host (with the port, the
// scheme's default when none), and a path under the base's, segment by segment.
type ReleaseSource struct {
	base     *url.URL
	host     string
	segments []string
}

// ParseReleaseSource checks a --release-url.
func ParseReleaseSource(raw string) (*ReleaseSource, error) {
	bad := func(why string) (*ReleaseSource, error) {
		return nil, fmt.Errorf("--release-url %q: %s", raw, why)
	}
	if len(raw) > maxReleaseURL {
		return bad(fmt.Sprintf("longer than %d bytes", maxReleaseURL))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad(err.Error())
	}
	if u.RawQuery != "" || u.ForceQuery {
		return bad("a release URL has no query")
	}
	if err := checkURLParts(u); err != nil {
		return bad(err.Error())
	}
	segs, err := pathSegments(u)
	if err != nil {
		return bad(err.Error())
	}
	// A trailing slash is the directory itself: https://h/bc/ and https://h/bc are the same base.
	if n := len(segs); n > 0 && segs[n-1] == "" {
		segs = segs[:n-1]
	}
	if err := checkSegments(segs); err != nil {
		return bad(err.Error())
	}
	base := *u
	base.Path, base.RawPath = "/"+strings.Join(segs, "/"), ""
	return &ReleaseSource{base: &base, host: hostKey(u), segments: segs}, nil
}

// String is the base URL.
func (s *ReleaseSource) String() string { return s.base.String() }

// URL is the URL of a file of a release: BASE/VERSION/NAME. version is a valid release version
// and name a release file name, neither of which can leave the directory.
func (s *ReleaseSource) URL(version, name string) string {
	return s.base.JoinPath(version, name).String()
}

// covers reports whether u may be fetched for a release: an http(s) URL with a host, no user or
// fragment, plain path segments, under the base.
func (s *ReleaseSource) covers(u *url.URL) error {
	if len(u.String()) > maxReleaseURL {
		return fmt.Errorf("the URL is longer than %d bytes", maxReleaseURL)
	}
	if err := checkURLParts(u); err != nil {
		return err
	}
	segs, err := pathSegments(u)
	if err != nil {
		return err
	}
	if err := checkSegments(segs); err != nil {
		return err
	}
	if u.Scheme != s.base.Scheme || hostKey(u) != s.host || len(segs) <= len(s.segments) {
		return fmt.Errorf("outside the release URL %s", s.base)
	}
	for i, seg := range s.segments {
		if segs[i] != seg {
			return fmt.Errorf("outside the release URL %s", s.base)
		}
	}
	return nil
}

// LoadReleaseKeys reads the --release-key files (minisign.pub files, or their base64 line
// alone): at least one, at most MaxReleaseKeys, no key twice.
func LoadReleaseKeys(paths []string) ([]*release.PublicKey, error) {
	if len(paths) > MaxReleaseKeys {
		return nil, fmt.Errorf("--release-key: %d keys; at most %d", len(paths), MaxReleaseKeys)
	}
	var keys []*release.PublicKey
	seen := map[release.KeyID]string{}
	for _, p := range paths {
		k, err := readReleaseKey(p)
		if err != nil {
			return nil, fmt.Errorf("--release-key %s: %w", p, err)
		}
		if other, dup := seen[k.ID]; dup {
			return nil, fmt.Errorf("--release-key %s: key %s is also in %s", p, k.ID, other)
		}
		seen[k.ID] = p
		keys = append(keys, k)
	}
	return keys, nil
}

func readReleaseKey(path string) (*release.PublicKey, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("larger than %d bytes: not a minisign public key", maxKeyFile)
	}
	return release.ParsePublicKey(data)
}

// checkURLParts checks what release URLs and every URL fetched under one share: http(s), a
// host, no user, no fragment, not opaque.
func checkURLParts(u *url.URL) error {
	switch {
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("not an http(s) URL")
	case u.Opaque != "" || u.Host == "" || u.Hostname() == "":
		return errors.New("the URL names no host")
	case u.User != nil:
		return errors.New("the URL has a user name or password")
	case u.Fragment != "" || u.RawFragment != "":
		return errors.New("the URL has a fragment")
	}
	return nil
}

// pathSegments splits u's path into its segments, each unescaped, after the leading slash.
func pathSegments(u *url.URL) ([]string, error) {
	p := u.EscapedPath()
	if p == "" || p == "/" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, errors.New("the path is not absolute")
	}
	var segs []string
	for raw := range strings.SplitSeq(p[1:], "/") {
		seg, err := url.PathUnescape(raw)
		if err != nil {
			return nil, fmt.Errorf("the path: %w", err)
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// checkSegments refuses a path segment that is empty, "." or "..", or holds a slash, a
// backslash or a control character once unescaped: what a server may read as another path.
func checkSegments(segs []string) error {
	for _, seg := range segs {
		if seg == "" || seg == "." || seg == ".." {
			return errors.New(`the path has an empty, "." or ".." segment`)
		}
		if strings.ContainsFunc(seg, func(r rune) bool { return r == '/' || r == '\\' || r < 0x20 || r == 0x7f }) {
			return errors.New("a path segment holds an escaped slash, a backslash or a control character")
		}
	}
	return nil
}

// hostKey is u's host in lower case with its port, the scheme's default when none is written.
func hostKey(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
