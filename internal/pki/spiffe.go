package pki

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/better-compute/better-compute/internal/pki/spiffeid"
)

// SPIFFE ID paths under the trust domain, one a kind of machine identity. The parsing lives in
// pki/spiffeid, which bcd links without the rest of the PKI.
const (
	pathNode     = spiffeid.KindNode     // spiffe://<td>/node/<nodeID>
	pathGateway  = spiffeid.KindGateway  // spiffe://<td>/gateway/<region>/<id>
	pathInternal = spiffeid.KindInternal // spiffe://<td>/internal/<name>
)

// ValidateTrustDomain reports whether td can be a trust domain: a lower-case DNS name (labels of
// a-z, 0-9 and hyphens, none starting or ending with a hyphen), as SPIFFE IDs and the
// configuration's trustDomain require.
func ValidateTrustDomain(td string) error {
	if err := spiffeid.ValidateTrustDomain(td); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

// isDNSName reports whether s is a DNS name; upper-case letters only when anyCase.
func isDNSName(s string, anyCase bool) bool { return spiffeid.IsDNSName(s, anyCase) }

// newID builds spiffe://<td>/<segments...>, checking every segment.
func newID(td string, segments ...string) (*url.URL, error) {
	if err := ValidateTrustDomain(td); err != nil {
		return nil, err
	}
	for _, s := range segments[1:] {
		if !spiffeid.ValidSegment(s) {
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
	u, err := spiffeid.FromCertificate(cert)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return u, nil
}

// identity returns the n segments after kind of cert's SPIFFE ID, refusing another trust domain
// or another kind of identity.
func identity(cert *x509.Certificate, trustDomain, kind string, n int) ([]string, error) {
	if trustDomain == "" {
		// spiffeid.Identity reads "" as any trust domain; a bundle always has one.
		return nil, errors.New("pki: no trust domain to check identities against")
	}
	_, s, err := spiffeid.Identity(cert, trustDomain, kind, n)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return s, nil
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
