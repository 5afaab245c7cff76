package pki

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strings"
)

// SPIFFE ID paths under the trust domain, one a kind of machine identity.
const (
	pathNode     = "node"     // spiffe://<td>/node/<nodeID>
	pathGateway  = "gateway"  // spiffe://<td>/gateway/<region>/<id>
	pathInternal = "internal" // spiffe://<td>/internal/<name>
)

// ValidateTrustDomain reports whether td can be a trust domain: a lower-case DNS name (labels of
// a-z, 0-9 and hyphens, none starting or ending with a hyphen), as SPIFFE IDs and the
// configuration's trustDomain require.
func ValidateTrustDomain(td string) error {
	if !isDNSName(td, false) {
		return fmt.Errorf("pki: the trust domain must be a lower-case DNS name like example.com, got %q", td)
	}
	return nil
}

// isDNSName reports whether s is a DNS name; upper-case letters only when anyCase.
func isDNSName(s string, anyCase bool) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			ok := r == '-' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') || (anyCase && 'A' <= r && r <= 'Z')
			if !ok {
				return false
			}
		}
	}
	return true
}

// validSegment reports whether s can be one segment of a SPIFFE ID's path: letters, digits, '.',
// '-' and '_', not "." or "..".
func validSegment(s string) bool {
	if s == "" || len(s) > 255 || s == "." || s == ".." {
		return false
	}
	for _, r := range s {
		ok := r == '.' || r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// newID builds spiffe://<td>/<segments...>, checking every segment.
func newID(td string, segments ...string) (*url.URL, error) {
	if err := ValidateTrustDomain(td); err != nil {
		return nil, err
	}
	for _, s := range segments[1:] {
		if !validSegment(s) {
			return nil, fmt.Errorf("pki: a %s identity part must be letters, digits, '.', '-' and '_' (at most 255), got %q", segments[0], s)
		}
	}
	return &url.URL{Scheme: "spiffe", Host: td, Path: "/" + strings.Join(segments, "/")}, nil
}

// NodeURI returns the SPIFFE ID of a node, spiffe://<trustDomain>/node/<nodeID>: what a node
// may put in its CSR's URI SAN (it may also leave it out; the issuer sets it either way).
func NodeURI(trustDomain, nodeID string) (*url.URL, error) {
	return newID(trustDomain, pathNode, nodeID)
}

// SPIFFEID returns the SPIFFE ID of a certificate, checked as the X.509-SVID rules ask: exactly
// one URI SAN, scheme spiffe, a valid trust domain and no user, port, query or fragment, and a
// non-empty path of valid segments. It does not verify the certificate's chain; callers use it
// on certificates that crypto/tls or x509.Verify has already verified.
func SPIFFEID(cert *x509.Certificate) (*url.URL, error) {
	if len(cert.URIs) != 1 {
		return nil, fmt.Errorf("pki: a machine certificate carries exactly one URI SAN, this one %d", len(cert.URIs))
	}
	u := *cert.URIs[0]
	if err := checkID(&u); err != nil {
		return nil, err
	}
	return &u, nil
}

func checkID(u *url.URL) error {
	bad := func(why string) error { return fmt.Errorf("pki: %q is not a valid SPIFFE ID: %s", u.String(), why) }
	switch {
	case u.Scheme != "spiffe":
		return bad("the scheme is not spiffe")
	case u.Opaque != "" || u.User != nil || u.Port() != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawPath != "":
		return bad("it has a user, port, query, fragment or escaped path")
	case ValidateTrustDomain(u.Host) != nil:
		return bad("the trust domain is not a lower-case DNS name")
	case !strings.HasPrefix(u.Path, "/"):
		return bad("the path is empty")
	}
	for s := range strings.SplitSeq(u.Path[1:], "/") {
		if !validSegment(s) {
			return bad("a path segment is empty or has characters other than letters, digits, '.', '-' and '_'")
		}
	}
	return nil
}

// identity returns the n segments after kind of cert's SPIFFE ID, refusing another trust domain
// or another kind of identity.
func identity(cert *x509.Certificate, trustDomain, kind string, n int) ([]string, error) {
	u, err := SPIFFEID(cert)
	if err != nil {
		return nil, err
	}
	if u.Host != trustDomain {
		return nil, fmt.Errorf("pki: identity %s is from trust domain %q, not %q", u, u.Host, trustDomain)
	}
	segs := strings.Split(u.Path[1:], "/")
	if len(segs) != n+1 || segs[0] != kind {
		return nil, fmt.Errorf("pki: identity %s is not a %s identity", u, kind)
	}
	return segs[1:], nil
}

// NodeID returns the node id of a node certificate of trustDomain (spiffe://<td>/node/<id>),
// and an error for any other identity, including a gateway's or one of another trust domain.
func NodeID(cert *x509.Certificate, trustDomain string) (string, error) {
	s, err := identity(cert, trustDomain, pathNode, 1)
	if err != nil {
		return "", err
	}
	return s[0], nil
}

// GatewayID returns the region and id of a gateway certificate of trustDomain
// (spiffe://<td>/gateway/<region>/<id>): what a daemon checks after verifying the gateway's
// chain, since internal servers' certificates chain to the same root.
func GatewayID(cert *x509.Certificate, trustDomain string) (region, id string, err error) {
	s, err := identity(cert, trustDomain, pathGateway, 2)
	if err != nil {
		return "", "", err
	}
	return s[0], s[1], nil
}

// InternalName returns the name of an internal client or server certificate of trustDomain
// (spiffe://<td>/internal/<name>).
func InternalName(cert *x509.Certificate, trustDomain string) (string, error) {
	s, err := identity(cert, trustDomain, pathInternal, 1)
	if err != nil {
		return "", err
	}
	return s[0], nil
}
