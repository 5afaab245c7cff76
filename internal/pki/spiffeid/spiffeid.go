// Package spiffeid parses and checks the SPIFFE IDs of Better Compute's machine certificates
// (spiffe://<trust domain>/node/<id>, /gateway/<region>/<id>, /internal/<name>) with the standard
// library alone. It is the part of the machine PKI that bcd links: the daemon checks a gateway's
// identity by the same rules the control plane issues and checks identities with, without the
// PKI's database and sealing code. Errors carry no package prefix; pki adds its own.
package spiffeid

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// The kinds of machine identity: the first path segment of a SPIFFE ID.
const (
	KindNode     = "node"     // spiffe://<td>/node/<nodeID>
	KindGateway  = "gateway"  // spiffe://<td>/gateway/<region>/<id>
	KindInternal = "internal" // spiffe://<td>/internal/<name>
)

// ValidateTrustDomain reports whether td can be a trust domain: a lower-case DNS name (labels of
// a-z, 0-9 and hyphens, none starting or ending with a hyphen).
func ValidateTrustDomain(td string) error {
	if !IsDNSName(td, false) {
		return fmt.Errorf("the trust domain must be a lower-case DNS name like example.com, got %q", td)
	}
	return nil
}

// IsDNSName reports whether s is a DNS name of at most 253 characters, with labels of letters,
// digits and hyphens (none starting or ending with one); upper-case letters only when anyCase.
func IsDNSName(s string, anyCase bool) bool {
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

// ValidSegment reports whether s can be one segment of a SPIFFE ID's path: 1 to 255 letters,
// digits, '.', '-' and '_', and not "." or "..".
func ValidSegment(s string) bool {
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

// Check reports whether u is a valid SPIFFE ID as the X.509-SVID rules ask: scheme spiffe, a
// valid trust domain and no user, port, query or fragment, and a non-empty path of valid
// segments.
func Check(u *url.URL) error {
	bad := func(why string) error { return fmt.Errorf("%q is not a valid SPIFFE ID: %s", u.String(), why) }
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
		if !ValidSegment(s) {
			return bad("a path segment is empty or has characters other than letters, digits, '.', '-' and '_'")
		}
	}
	return nil
}

// FromCertificate returns the SPIFFE ID of a certificate: its one URI SAN, checked by Check. It
// does not verify the certificate's chain; callers use it on certificates that crypto/tls or
// x509.Verify has already verified.
func FromCertificate(cert *x509.Certificate) (*url.URL, error) {
	if len(cert.URIs) != 1 {
		return nil, fmt.Errorf("a machine certificate carries exactly one URI SAN, this one %d", len(cert.URIs))
	}
	u := *cert.URIs[0]
	if err := Check(&u); err != nil {
		return nil, err
	}
	return &u, nil
}

// Identity returns the n segments after kind of cert's SPIFFE ID, refusing one of another trust
// domain (any valid one when trustDomain is empty) or of another kind, and the ID itself.
func Identity(cert *x509.Certificate, trustDomain, kind string, n int) (*url.URL, []string, error) {
	u, err := FromCertificate(cert)
	if err != nil {
		return nil, nil, err
	}
	if trustDomain != "" && u.Host != trustDomain {
		return nil, nil, fmt.Errorf("identity %s is from trust domain %q, not %q", u, u.Host, trustDomain)
	}
	segs := strings.Split(u.Path[1:], "/")
	if len(segs) != n+1 || segs[0] != kind {
		return nil, nil, fmt.Errorf("identity %s is not a %s identity", u, kind)
	}
	return u, segs[1:], nil
}

// Gateway is a gateway's identity, spiffe://<TrustDomain>/gateway/<Region>/<ID>.
type Gateway struct {
	TrustDomain, Region, ID string
}

// ErrNotGateway is the error of a certificate that verifies but names no gateway of the expected
// trust domain: a node's, an internal service's, or another deployment's.
var ErrNotGateway = errors.New("not a gateway's certificate")

// GatewayOf returns the gateway identity of cert, which must be a gateway's of trustDomain, or
// of any trust domain when trustDomain is empty (a node joining learns its trust domain from
// the gateway, and checks the join's answer against it). Any other identity is ErrNotGateway.
func GatewayOf(cert *x509.Certificate, trustDomain string) (Gateway, error) {
	u, s, err := Identity(cert, trustDomain, KindGateway, 2)
	if err != nil {
		return Gateway{}, fmt.Errorf("%w: %w", ErrNotGateway, err)
	}
	return Gateway{TrustDomain: u.Host, Region: s[0], ID: s[1]}, nil
}
