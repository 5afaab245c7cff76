package host

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/better-compute/better-compute/internal/command"
)

// Upgrade source limits.
const (
	// MaxUpgradeSources bounds how many --upgrade-source prefixes bcd takes.
	MaxUpgradeSources = 16
	// MaxUpgradeURL bounds the length of an upgrade source and of an upgrade's URL.
	MaxUpgradeURL = command.MaxUpgradeURL
)

// UpgradeSource is a URL prefix an operator lets upgrades fetch from (bcd run
// --upgrade-source). It is https, or http to a loopback IP address (a source on the host
// itself, as tests use); it names no user, query or fragment. A URL is under it when its scheme
// and host (with the port, the scheme's default when none) are the same and its path starts
// with the source's path segment by segment: https://releases.example.com/bcd/ covers
// https://releases.example.com/bcd/v1.2.3/bcd-linux-amd64, not
// https://releases.example.com.evil.com/bcd/x, https://releases.example.com/bcd-evil/x or
// https://releases.example.com/bcd/../x.
type UpgradeSource struct {
	raw      string
	scheme   string
	host     string
	segments []string
}

// String is the source as the operator wrote it.
func (s UpgradeSource) String() string { return s.raw }

// ParseUpgradeSource checks an --upgrade-source prefix.
func ParseUpgradeSource(raw string) (UpgradeSource, error) {
	s := UpgradeSource{raw: raw}
	bad := func(why string) (UpgradeSource, error) {
		return UpgradeSource{}, fmt.Errorf("upgrade source %q: %s", raw, why)
	}
	if len(raw) > MaxUpgradeURL {
		return bad(fmt.Sprintf("longer than %d bytes", MaxUpgradeURL))
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad(err.Error())
	}
	if u.RawQuery != "" || u.ForceQuery {
		return bad("a source has no query")
	}
	if err := checkURLParts(u); err != nil {
		return bad(err.Error())
	}
	if u.Scheme == "http" {
		if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
			return bad("plain http is only for a loopback IP address (127.0.0.1, ::1); use https")
		}
	}
	segs, err := pathSegments(u)
	if err != nil {
		return bad(err.Error())
	}
	// A trailing slash is the directory itself: https://h/bcd/ and https://h/bcd are the same
	// prefix, segment by segment.
	if n := len(segs); n > 0 && segs[n-1] == "" {
		segs = segs[:n-1]
	}
	if err := checkSegments(segs); err != nil {
		return bad(err.Error())
	}
	s.scheme, s.host, s.segments = u.Scheme, hostKey(u), segs
	return s, nil
}

// ParseUpgradeSources checks every --upgrade-source; there may be at most MaxUpgradeSources.
func ParseUpgradeSources(raw []string) ([]UpgradeSource, error) {
	if len(raw) > MaxUpgradeSources {
		return nil, fmt.Errorf("%d upgrade sources; at most %d", len(raw), MaxUpgradeSources)
	}
	var out []UpgradeSource
	for _, r := range raw {
		s, err := ParseUpgradeSource(strings.TrimSpace(r))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// covers reports whether u (checked by checkUpgradeURL) is under the source.
func (s UpgradeSource) covers(u *url.URL, segs []string) bool {
	if u.Scheme != s.scheme || hostKey(u) != s.host || len(segs) < len(s.segments) {
		return false
	}
	for i, seg := range s.segments {
		if segs[i] != seg {
			return false
		}
	}
	return true
}

// ErrUpgradeSource is the error of an upgrade URL under none of the node's upgrade sources.
var ErrUpgradeSource = errors.New("not under any of this node's upgrade sources (bcd run --upgrade-source)")

// checkUpgradeURL reports whether u may be fetched for an upgrade: an http(s) URL with a host,
// no user or fragment, a path of plain segments (none empty, "." or "..", even escaped), under
// one of sources.
func checkUpgradeURL(u *url.URL, sources []UpgradeSource) error {
	if len(u.String()) > MaxUpgradeURL {
		return fmt.Errorf("the url is longer than %d bytes", MaxUpgradeURL)
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
	for _, s := range sources {
		if s.covers(u, segs) {
			return nil
		}
	}
	return ErrUpgradeSource
}

// checkURLParts checks what sources and upgrade URLs share: http(s), a host, no user, no
// fragment, not opaque.
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
