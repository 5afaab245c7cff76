package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// IssueNode signs a node's client certificate for the public key of csrDER (a PKCS #10 CSR in
// DER): the node keeps its private key. The CSR must be signed by the key it carries, which must
// be ECDSA P-256, and its URI SANs may name nothing but the node's own SPIFFE ID, so a node
// cannot ask for another identity; everything else in the CSR (subject, other SANs, extensions)
// is ignored. The certificate carries spiffe://<td>/node/<nodeID>, is for client auth only, and
// lasts ttl (DefaultNodeTTL when 0, never past the node CA). chainPEM is the certificate then
// the node CA, what the node presents in its TLS handshake.
func (b *Bundle) IssueNode(csrDER []byte, nodeID string, ttl time.Duration) (chainPEM []byte, notAfter time.Time, err error) {
	csr, err := x509.ParseCertificateRequest(csrDER)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("pki: parse the CSR: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, time.Time{}, fmt.Errorf("pki: the CSR is not signed by the key it carries: %w", err)
	}
	return b.IssueNodeChecked(csr, nodeID, ttl)
}

// IssueNodeChecked is IssueNode for a CSR the caller has parsed and whose signature it has
// checked (csr.CheckSignature), so that a join verifies the CSR's signature once, not twice: an
// ECDSA verification is a good part of what a join costs.
func (b *Bundle) IssueNodeChecked(csr *x509.CertificateRequest, nodeID string, ttl time.Duration) (chainPEM []byte, notAfter time.Time, err error) {
	id, err := NodeURI(b.trustDomain, nodeID)
	if err != nil {
		return nil, time.Time{}, err
	}
	if ttl < 0 {
		return nil, time.Time{}, fmt.Errorf("pki: the certificate lifetime must not be negative, got %s", ttl)
	} else if ttl == 0 {
		ttl = DefaultNodeTTL
	}
	pub, ok := csr.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, time.Time{}, errors.New("pki: the CSR's key must be ECDSA P-256")
	}
	for _, u := range csr.URIs {
		if u.String() != id.String() {
			return nil, time.Time{}, fmt.Errorf("pki: the CSR asks for identity %q; node %s may only be %s", u, nodeID, id)
		}
	}
	ca := b.nodeCAs[0]
	der, notAfter, err := b.sign(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: nodeID},
		URIs:        []*url.URL{id},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, pub, ttl)
	if err != nil {
		return nil, time.Time{}, err
	}
	return append(certPEM(der), ca.certPEM...), notAfter, nil
}

// IssueGateway makes a key and serving certificate for gateway id of region, valid for the DNS
// names and IP addresses daemons dial (at least one), with the SPIFFE ID
// spiffe://<td>/gateway/<region>/<id>, for server and client auth, lasting GatewayTTL.
//
// The root signs it directly: daemons trust exactly the root they got at join. The chain is the
// certificate then the root itself, so that a node joining with only the root's pin
// (`bcd join --ca-cert-hash`) finds the root in the handshake and checks it against the pin;
// a node that has the root already ignores the copy. A dedicated gateway CA would add no protection (its key would be sealed
// next to the root's, under the same secret) but another authority to rotate. Node
// certificates cannot pass for a gateway (their CA is limited to client auth), but internal
// certificates also chain to the root, so daemons check the identity with GatewayID too.
func (b *Bundle) IssueGateway(region, id string, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	u, err := newID(b.trustDomain, pathGateway, region, id)
	if err != nil {
		return nil, nil, err
	}
	if len(dnsNames)+len(ips) == 0 {
		return nil, nil, errors.New("pki: a gateway certificate needs at least one DNS name or IP address")
	}
	return b.issueServer(b.root, u, id, dnsNames, ips, GatewayTTL, true)
}

// IssueInternal makes a key and certificate for the internal control API, for both server and
// client auth (the API is mTLS on both sides), with the SPIFFE ID spiffe://<td>/internal/<name>,
// the given DNS names and IP addresses (none for a client only), lasting InternalTTL. certPEM is
// the certificate then the internal CA; peers verify it against InternalCAPool.
func (b *Bundle) IssueInternal(name string, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error) {
	u, err := newID(b.trustDomain, pathInternal, name)
	if err != nil {
		return nil, nil, err
	}
	return b.issueServer(b.internal, u, name, dnsNames, ips, InternalTTL, true)
}

// issueServer makes a key and a server+client certificate signed by ca.
func (b *Bundle) issueServer(ca *authority, id *url.URL, cn string, dnsNames []string, ips []net.IP, ttl time.Duration, chain bool) (certOut, keyOut []byte, err error) {
	for _, n := range dnsNames {
		if !isDNSName(strings.TrimPrefix(n, "*."), true) {
			return nil, nil, fmt.Errorf("pki: %q is not a DNS name", n)
		}
	}
	for _, ip := range ips {
		if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			return nil, nil, fmt.Errorf("pki: %v is not an IP address", ip)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: generate a key: %w", err)
	}
	certDER, _, err := b.sign(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		URIs:        []*url.URL{id},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, &key.PublicKey, ttl)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: encode the key: %w", err)
	}
	certOut = certPEM(certDER)
	if chain {
		certOut = append(certOut, ca.certPEM...)
	}
	return certOut, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// sign completes tmpl as a leaf certificate valid from now (less clock skew) for ttl, never past
// the CA, signs it with ca, and returns its DER and when it expires. It does not parse what it
// made back: x509.CreateCertificate has already checked the signature against ca's key, and a
// join pays for every parse.
func (b *Bundle) sign(ca *authority, tmpl *x509.Certificate, pub crypto.PublicKey, ttl time.Duration) (der []byte, notAfter time.Time, err error) {
	now := b.now()
	if !now.Before(ca.cert.NotAfter) {
		return nil, time.Time{}, fmt.Errorf("pki: the %s CA expired on %s", ca.kind, ca.cert.NotAfter.UTC().Format(time.RFC3339))
	}
	tmpl.NotBefore = now.Add(-clockSkew)
	tmpl.NotAfter = minTime(now.Add(ttl), ca.cert.NotAfter)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.BasicConstraintsValid = true
	// SerialNumber nil: x509 draws a random one as RFC 5280 asks.
	der, err = x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("pki: sign the certificate: %w", err)
	}
	// The certificate holds whole seconds in UTC: the expiry is what a parse would read.
	return der, tmpl.NotAfter.UTC().Truncate(time.Second), nil
}

// VerifyNode verifies a node's client certificate chain (leaf first, as crypto/tls gives it in
// VerifyPeerCertificate or ConnectionState.PeerCertificates) against the node CAs accepted now,
// for client auth, and returns the node id. This is what the gateway checks on every session.
func (b *Bundle) VerifyNode(chain []*x509.Certificate) (string, error) {
	if len(chain) == 0 {
		return "", errors.New("pki: no client certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{
		Roots:         b.NodeCAPool(),
		Intermediates: inter,
		CurrentTime:   b.now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return "", fmt.Errorf("pki: the node certificate does not verify: %w", err)
	}
	return NodeID(chain[0], b.trustDomain)
}

// joinContext separates JoinService signatures (Ed25519ctx) from any other use of the key.
const joinContext = "better-compute join ticket v1"

// JoinPublicKey is the JoinService public key, which verifies join tickets.
func (b *Bundle) JoinPublicKey() ed25519.PublicKey {
	return b.join.Public().(ed25519.PublicKey)
}

// SignJoinTicket signs a join ticket (its encoding is the caller's) with the JoinService key.
// The signature is Ed25519ctx with a context of its own, so it verifies only as a join ticket.
func (b *Bundle) SignJoinTicket(ticket []byte) []byte {
	sig, err := b.join.Sign(nil, ticket, &ed25519.Options{Context: joinContext})
	if err != nil {
		panic("pki: ed25519 sign: " + err.Error()) // only for a context over 255 bytes
	}
	return sig
}

// VerifyJoinTicket reports whether sig is the JoinService's signature of ticket.
func (b *Bundle) VerifyJoinTicket(ticket, sig []byte) bool {
	return VerifyJoinTicket(b.JoinPublicKey(), ticket, sig)
}

// VerifyJoinTicket reports whether sig is pub's join-ticket signature of ticket, for a holder
// of the public key only.
func VerifyJoinTicket(pub ed25519.PublicKey, ticket, sig []byte) bool {
	return len(pub) == ed25519.PublicKeySize &&
		ed25519.VerifyWithOptions(pub, ticket, sig, &ed25519.Options{Context: joinContext}) == nil
}
