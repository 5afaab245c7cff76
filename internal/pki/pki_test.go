package pki

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/pki/cahash"
	"github.com/better-compute/better-compute/internal/seal"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const (
	secret = "0123456789abcdef0123456789abcdef-test"
	td     = "example.com"
)

// clock is a settable time for WithClock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func initBundle(t *testing.T, opts ...Option) *Bundle {
	t.Helper()
	b, err := Init(context.Background(), dbtest.Pool(t), secret, td, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// csr makes a CSR for key with the given URI SANs.
func csr(t *testing.T, key any, uris ...string) []byte {
	t.Helper()
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "whatever"}}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func p256(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func parseChain(t *testing.T, chainPEM []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for rest := chainPEM; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		t.Fatal("no certificate in PEM")
	}
	return out
}

func issueNode(t *testing.T, b *Bundle, nodeID string) ([]*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	t.Helper()
	key := p256(t)
	chainPEM, _, err := b.IssueNode(csr(t, key, "spiffe://"+td+"/node/"+nodeID), nodeID, 0)
	if err != nil {
		t.Fatal(err)
	}
	return parseChain(t, chainPEM), key, chainPEM
}

func TestInitLoadRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	if _, err := Load(ctx, pool, secret); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Load before Init: %v, want ErrNotInitialized", err)
	}
	if _, err := Status(ctx, pool); !errors.Is(err, ErrNotInitialized) {
		t.Fatalf("Status before Init: %v, want ErrNotInitialized", err)
	}
	b1, err := Init(ctx, pool, secret, td)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := Load(ctx, pool, secret)
	if err != nil {
		t.Fatal(err)
	}
	if b2.TrustDomain() != td || !bytes.Equal(b1.RootPEM(), b2.RootPEM()) ||
		!b1.nodeCAs[0].cert.Equal(b2.nodeCAs[0].cert) || !b1.internal.cert.Equal(b2.internal.cert) ||
		!b1.JoinPublicKey().Equal(b2.JoinPublicKey()) {
		t.Fatal("the loaded bundle differs from the initialised one")
	}
	// Keys round-trip too: what one process signs, another verifies.
	ticket := []byte(`{"node":"n1","exp":123}`)
	if !b2.VerifyJoinTicket(ticket, b1.SignJoinTicket(ticket)) {
		t.Error("join ticket signed by b1 does not verify with b2")
	}
	chain, _, _ := issueNode(t, b2, "n1")
	if _, err := b1.VerifyNode(chain); err != nil {
		t.Errorf("node cert from the loaded bundle: %v", err)
	}
	root := b2.root.cert
	if !root.IsCA || time.Until(root.NotAfter) < 9*365*24*time.Hour || root.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("root CA: IsCA %v, NotAfter %v, %v", root.IsCA, root.NotAfter, root.PublicKeyAlgorithm)
	}

	// Init again: a no-op for the same trust domain, an error for another.
	b3, err := Init(ctx, pool, secret, td)
	if err != nil || !bytes.Equal(b3.RootPEM(), b1.RootPEM()) {
		t.Fatalf("second Init for the same trust domain: %v (same root: %v)", err, err == nil && bytes.Equal(b3.RootPEM(), b1.RootPEM()))
	}
	if _, err := Init(ctx, pool, secret, "other.example"); !errors.Is(err, ErrInitialized) || !strings.Contains(err.Error(), td) {
		t.Fatalf("Init for another trust domain: %v, want ErrInitialized naming %s", err, td)
	}

	st, err := Status(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, a := range st.Authorities {
		kinds[a.Kind]++
		if !a.Issuer || a.Retired || a.Subject == "" {
			t.Errorf("status of a fresh authority: %+v", a)
		}
	}
	if st.TrustDomain != td || len(st.Authorities) != 4 || kinds[KindRoot]+kinds[KindNode]+kinds[KindInternal]+kinds[KindJoin] != 4 || len(st.Warnings) != 0 {
		t.Errorf("status: %+v", st)
	}
}

func TestConcurrentInit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	roots := make(chan []byte, 4)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			b, err := Init(ctx, pool, secret, td)
			if err != nil {
				errs <- err
				return
			}
			roots <- b.RootPEM()
		}()
	}
	var first []byte
	for range 4 {
		select {
		case err := <-errs:
			t.Fatal(err)
		case r := <-roots:
			if first == nil {
				first = r
			} else if !bytes.Equal(first, r) {
				t.Fatal("concurrent Inits made different roots")
			}
		}
	}
}

func TestInitValidatesTrustDomain(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "Example.com", "a..b", "-a.com", "a-.com", "spiffe://example.com", "exa mple.com", "a_b.com", strings.Repeat("a", 64) + ".com"} {
		// Validation comes before the database is touched.
		if _, err := Init(t.Context(), nil, secret, bad); err == nil || !strings.Contains(err.Error(), "lower-case DNS name") {
			t.Errorf("Init(%q): %v, want a trust domain error", bad, err)
		}
	}
	for _, good := range []string{"example.com", "localhost", "a-1.b2.example"} {
		if err := ValidateTrustDomain(good); err != nil {
			t.Errorf("ValidateTrustDomain(%q): %v", good, err)
		}
	}
}

func TestPrivateKeysAreSealed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	b, err := Init(ctx, pool, secret, td)
	if err != nil {
		t.Fatal(err)
	}
	// Everything stored, as raw column bytes and as PostgreSQL's text of whole rows.
	var stored [][]byte
	rows, err := pool.Query(ctx, `SELECT sealed_key, public_key, convert_to(coalesce(cert_pem, ''), 'UTF8'), convert_to(t::text, 'UTF8') FROM pki_authorities t
		UNION ALL SELECT ''::bytea, ''::bytea, ''::bytea, convert_to(s::text, 'UTF8') FROM pki_settings s`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a, b, c, d []byte
		if err := rows.Scan(&a, &b, &c, &d); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, a, b, c, bytes.ToLower(d))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 5*4 {
		t.Fatalf("read %d values, want 20", len(stored))
	}
	// What must not appear: PEM key headers, each key's PKCS #8 DER and its raw scalar or seed,
	// in binary and in hex.
	needles := [][]byte{[]byte("PRIVATE KEY")}
	for _, k := range []any{b.root.key, b.nodeCAs[0].key, b.internal.key, b.join} {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		var raw []byte
		switch k := k.(type) {
		case *ecdsa.PrivateKey:
			if raw, err = k.Bytes(); err != nil {
				t.Fatal(err)
			}
		case ed25519.PrivateKey:
			raw = k.Seed()
		}
		needles = append(needles, der, raw, []byte(hex.EncodeToString(der)), []byte(hex.EncodeToString(raw)))
	}
	for _, hay := range stored {
		for _, n := range needles {
			if bytes.Contains(hay, n) {
				t.Fatalf("a private key is stored in the clear (%d bytes matched)", len(n))
			}
		}
	}
}

func TestWrongSecret(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	if _, err := Init(ctx, pool, secret, td); err != nil {
		t.Fatal(err)
	}
	other := "another-deployment-secret-0123456789"
	for name, f := range map[string]func() error{
		"Load":   func() error { _, err := Load(ctx, pool, other); return err },
		"Init":   func() error { _, err := Init(ctx, pool, other, td); return err },
		"Rotate": func() error { _, err := RotateNodeCA(ctx, pool, other, time.Hour); return err },
	} {
		err := f()
		if !errors.Is(err, ErrWrongSecret) || !errors.Is(err, seal.ErrOpen) || err.Error() != "pki: cannot open the PKI bundle: wrong deployment secret?" {
			t.Errorf("%s with the wrong secret: %v", name, err)
		}
	}
	if _, err := Load(ctx, pool, "short"); err == nil {
		t.Error("Load with a short secret succeeded")
	}
	// The failed rotation changed nothing.
	if st, err := Status(ctx, pool); err != nil || len(st.Authorities) != 4 {
		t.Errorf("after a refused rotation: %v, %+v", err, st)
	}
}

func TestIssueNode(t *testing.T) {
	t.Parallel()
	b := initBundle(t)
	key := p256(t)
	before := time.Now()
	chainPEM, notAfter, err := b.IssueNode(csr(t, key, "spiffe://example.com/node/n-42"), "n-42", 0)
	if err != nil {
		t.Fatal(err)
	}
	chain := parseChain(t, chainPEM)
	if len(chain) != 2 || !chain[1].Equal(b.nodeCAs[0].cert) {
		t.Fatalf("chain has %d certs, want leaf + node CA", len(chain))
	}
	leaf := chain[0]
	if !leaf.NotAfter.Equal(notAfter) || notAfter.Sub(before) < 24*time.Hour-time.Second || notAfter.Sub(before) > 24*time.Hour+time.Minute {
		t.Errorf("NotAfter %v, want about 24h from now (returned %v)", leaf.NotAfter, notAfter)
	}
	if leaf.IsCA || len(leaf.ExtKeyUsage) != 1 || leaf.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth || !leaf.PublicKey.(*ecdsa.PublicKey).Equal(&key.PublicKey) {
		t.Errorf("leaf: IsCA %v, EKU %v", leaf.IsCA, leaf.ExtKeyUsage)
	}
	inter := x509.NewCertPool()
	inter.AddCert(chain[1])
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: b.NodeCAPool(), Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify against NodeCAPool: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: b.NodeCAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a node certificate verifies for server auth")
	}
	if id, err := SPIFFEID(leaf); err != nil || id.String() != "spiffe://example.com/node/n-42" {
		t.Errorf("SPIFFE ID %v, %v", id, err)
	}
	if id, err := NodeID(leaf, td); err != nil || id != "n-42" {
		t.Errorf("NodeID %q, %v", id, err)
	}
	if id, err := b.VerifyNode(chain); err != nil || id != "n-42" {
		t.Errorf("VerifyNode %q, %v", id, err)
	}
	if _, err := NodeID(leaf, "other.example"); err == nil || !strings.Contains(err.Error(), "trust domain") {
		t.Errorf("NodeID for another trust domain: %v", err)
	}

	// A CSR without any URI SAN is fine (the issuer sets it), and ttl is honoured.
	chainPEM, notAfter, err = b.IssueNode(csr(t, p256(t)), "n-43", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := b.VerifyNode(parseChain(t, chainPEM)); err != nil || id != "n-43" || notAfter.Sub(before) > time.Hour+time.Minute {
		t.Errorf("CSR without SAN: %q, %v, NotAfter %v", id, err, notAfter)
	}
}

func TestIssueNodeRefusesOtherIdentities(t *testing.T) {
	t.Parallel()
	b := initBundle(t)
	key := p256(t)
	for _, uris := range [][]string{
		{"spiffe://example.com/node/n2"},
		{"spiffe://example.com/node/n1", "spiffe://example.com/node/n2"},
		{"spiffe://example.com/gateway/eu/g1"},
		{"spiffe://other.example/node/n1"},
		{"spiffe://example.com/node/n1/x"},
		{"https://example.com/node/n1"},
	} {
		if _, _, err := b.IssueNode(csr(t, key, uris...), "n1", 0); err == nil || !strings.Contains(err.Error(), "asks for identity") {
			t.Errorf("CSR for %v as n1: %v, want refused", uris, err)
		}
	}
	for _, bad := range []string{"", "a/b", "..", "n 1", "n1?x"} {
		if _, _, err := b.IssueNode(csr(t, key), bad, 0); err == nil {
			t.Errorf("node id %q accepted", bad)
		}
	}
}

func TestIssueNodeRefusesBadCSRs(t *testing.T) {
	t.Parallel()
	b := initBundle(t)
	a, c := p256(t), p256(t)
	// A CSR carrying c's key with the signature a made over its own CSR.
	type csrASN1 struct {
		Info asn1.RawValue
		Alg  asn1.RawValue
		Sig  asn1.BitString
	}
	var fromA, fromC csrASN1
	if _, err := asn1.Unmarshal(csr(t, a), &fromA); err != nil {
		t.Fatal(err)
	}
	if _, err := asn1.Unmarshal(csr(t, c), &fromC); err != nil {
		t.Fatal(err)
	}
	forged, err := asn1.Marshal(csrASN1{Info: fromC.Info, Alg: fromA.Alg, Sig: fromA.Sig})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x509.ParseCertificateRequest(forged); err != nil {
		t.Fatalf("the forged CSR does not parse: %v", err)
	}
	if _, _, err := b.IssueNode(forged, "n1", 0); err == nil || !strings.Contains(err.Error(), "not signed by the key it carries") {
		t.Errorf("CSR signed by another key: %v", err)
	}

	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	for name, der := range map[string][]byte{"P-384": csr(t, p384), "Ed25519": csr(t, ed)} {
		if _, _, err := b.IssueNode(der, "n1", 0); err == nil || !strings.Contains(err.Error(), "P-256") {
			t.Errorf("%s CSR: %v, want refused", name, err)
		}
	}
	if _, _, err := b.IssueNode([]byte("not a CSR"), "n1", 0); err == nil {
		t.Error("garbage CSR accepted")
	}
	if _, _, err := b.IssueNode(csr(t, a), "n1", -time.Hour); err == nil {
		t.Error("negative ttl accepted")
	}
}

func TestForeignCertificatesDoNotVerify(t *testing.T) {
	t.Parallel()
	b := initBundle(t)
	// A CA made here, issuing a node certificate that looks right in every other way.
	caKey := p256(t)
	caTmpl := &x509.Certificate{
		Subject: pkix.Name{CommonName: "Better Compute node CA " + td}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	id, _ := NodeURI(td, "n1")
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		URIs: []*url.URL{id}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, &p256(t).PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(leafDER)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: b.NodeCAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a certificate of a foreign CA verifies against NodeCAPool")
	}
	if _, err := b.VerifyNode([]*x509.Certificate{leaf, ca}); err == nil {
		t.Error("VerifyNode accepts a foreign CA's certificate")
	}

	// Another deployment's node certificate.
	other := initBundle(t)
	chain, _, _ := issueNode(t, other, "n1")
	if _, err := b.VerifyNode(chain); err == nil {
		t.Error("VerifyNode accepts another deployment's node certificate")
	}

	// Gateway and internal certificates are not node certificates.
	gw, _, err := b.IssueGateway("eu", "g1", []string{"g1.example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in, _, err := b.IssueInternal("api", []string{"localhost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string][]byte{"gateway": gw, "internal": in} {
		if _, err := b.VerifyNode(parseChain(t, p)); err == nil {
			t.Errorf("VerifyNode accepts a %s certificate", name)
		}
	}
}

func TestGatewayCertificate(t *testing.T) {
	t.Parallel()
	b := initBundle(t)
	certPEM, keyPEM, err := b.IssueGateway("eu-west", "gw-1", []string{"gw1.example.com"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(keyPEM, []byte("BEGIN PRIVATE KEY")) {
		t.Errorf("key PEM: %.40s", keyPEM)
	}
	chain := parseChain(t, certPEM)
	leaf := chain[0]
	// The leaf, then the root itself: a node joining with the root's pin finds it there.
	if len(chain) != 2 || !chain[1].Equal(parseChain(t, b.RootPEM())[0]) {
		t.Errorf("gateway cert PEM holds %d certificates, want the leaf and the root", len(chain))
	} else if got := cahash.Of(chain[1]); got != b.RootCertHash() || !strings.HasPrefix(got, "sha256:") {
		t.Errorf("the root in the chain has pin %s; RootCertHash says %s", got, b.RootCertHash())
	}
	opts := x509.VerifyOptions{Roots: b.RootPool(), DNSName: "gw1.example.com", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := leaf.Verify(opts); err != nil {
		t.Errorf("verify against the root for gw1.example.com: %v", err)
	}
	opts.DNSName = "127.0.0.1"
	if _, err := leaf.Verify(opts); err != nil {
		t.Errorf("verify for 127.0.0.1: %v", err)
	}
	opts.DNSName = "evil.example.com"
	if _, err := leaf.Verify(opts); err == nil {
		t.Error("verifies for a name it does not carry")
	}
	// Daemons get the root as PEM.
	daemonRoots := x509.NewCertPool()
	if !daemonRoots.AppendCertsFromPEM(b.RootPEM()) {
		t.Fatal("RootPEM does not parse")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: daemonRoots, DNSName: "gw1.example.com"}); err != nil {
		t.Errorf("verify against RootPEM: %v", err)
	}
	if region, id, err := GatewayID(leaf, td); err != nil || region != "eu-west" || id != "gw-1" {
		t.Errorf("GatewayID %q %q %v", region, id, err)
	}
	if _, err := NodeID(leaf, td); err == nil {
		t.Error("NodeID accepts a gateway certificate")
	}
	if _, _, err := b.IssueGateway("eu", "g", nil, nil); err == nil {
		t.Error("a gateway certificate without names")
	}
	if _, _, err := b.IssueGateway("eu", "g", []string{"bad name"}, nil); err == nil {
		t.Error("a gateway certificate for a bad DNS name")
	}

	// A real mTLS handshake: a daemon with a node certificate dials the gateway.
	gwCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	_, nodeKey, nodeChainPEM := issueNode(t, b, "n7")
	nodeKeyDER, _ := x509.MarshalPKCS8PrivateKey(nodeKey)
	nodeCert, err := tls.X509KeyPair(nodeChainPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: nodeKeyDER}))
	if err != nil {
		t.Fatal(err)
	}
	cc, sc := net.Pipe()
	defer cc.Close()
	defer sc.Close()
	server := tls.Server(sc, &tls.Config{Certificates: []tls.Certificate{gwCert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: b.NodeCAPool()})
	client := tls.Client(cc, &tls.Config{Certificates: []tls.Certificate{nodeCert}, RootCAs: daemonRoots, ServerName: "gw1.example.com"})
	done := make(chan error, 1)
	go func() { done <- client.Handshake() }()
	if err := server.Handshake(); err != nil {
		t.Fatalf("gateway handshake: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("daemon handshake: %v", err)
	}
	if id, err := b.VerifyNode(server.ConnectionState().PeerCertificates); err != nil || id != "n7" {
		t.Errorf("the gateway sees node %q, %v", id, err)
	}
	if _, gid, err := GatewayID(client.ConnectionState().PeerCertificates[0], td); err != nil || gid != "gw-1" {
		t.Errorf("the daemon sees gateway %q, %v", gid, err)
	}
}

func TestInternalCertificate(t *testing.T) {
	t.Parallel()
	b := initBundle(t)
	certPEM, keyPEM, err := b.IssueInternal("controllers", []string{"localhost"}, []net.IP{net.IPv6loopback})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	chain := parseChain(t, certPEM)
	if len(chain) != 2 || !chain[1].Equal(b.internal.cert) {
		t.Fatalf("chain of %d, want leaf + internal CA", len(chain))
	}
	for _, eku := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := chain[0].Verify(x509.VerifyOptions{Roots: b.InternalCAPool(), DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{eku}}); err != nil {
			t.Errorf("verify for %v: %v", eku, err)
		}
	}
	if name, err := InternalName(chain[0], td); err != nil || name != "controllers" {
		t.Errorf("InternalName %q, %v", name, err)
	}
	// A node certificate does not pass for an internal client.
	nodeChain, _, _ := issueNode(t, b, "n1")
	if _, err := nodeChain[0].Verify(x509.VerifyOptions{Roots: b.InternalCAPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("a node certificate verifies against InternalCAPool")
	}
}

func TestRotateNodeCA(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	t0 := time.Now()
	clk := &clock{t: t0}
	old, err := Init(ctx, pool, secret, td, WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	oldChain, _, _ := issueNode(t, old, "n1")

	clk.t = t0.Add(time.Minute)
	b, err := RotateNodeCA(ctx, pool, secret, time.Hour, WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.nodeCAs) != 2 || b.nodeCAs[0].cert.Equal(old.nodeCAs[0].cert) || !b.nodeCAs[1].cert.Equal(old.nodeCAs[0].cert) {
		t.Fatal("after rotation the bundle should hold the new node CA first, then the old one")
	}
	newChain, _, _ := issueNode(t, b, "n2")
	if !newChain[1].Equal(b.nodeCAs[0].cert) {
		t.Fatal("the new node CA does not issue")
	}
	if !bytes.Equal(b.RootPEM(), old.RootPEM()) || !b.internal.cert.Equal(old.internal.cert) {
		t.Error("rotation changed the root or the internal CA")
	}

	check := func(at time.Duration, wantOld bool) {
		t.Helper()
		clk.t = t0.Add(at)
		if _, err := b.VerifyNode(oldChain); (err == nil) != wantOld {
			t.Errorf("at +%s: old node CA's cert verifies = %v, want %v (%v)", at, err == nil, wantOld, err)
		}
		// The plain x509 path, as crypto/tls does it with ClientCAs.
		_, err := oldChain[0].Verify(x509.VerifyOptions{Roots: b.NodeCAPool(), CurrentTime: clk.t, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if (err == nil) != wantOld {
			t.Errorf("at +%s: x509 verify against NodeCAPool = %v, want %v", at, err == nil, wantOld)
		}
		if _, err := b.VerifyNode(newChain); err != nil {
			t.Errorf("at +%s: new node CA's cert: %v", at, err)
		}
	}
	check(30*time.Minute, true)
	check(60*time.Minute, true)
	check(61*time.Minute, false)
	check(5*time.Hour, false)

	// A fresh load after the overlap holds only the new CA; Status calls the old one retired.
	clk.t = t0.Add(2 * time.Hour)
	reloaded, err := Load(ctx, pool, secret, WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	if len(reloaded.nodeCAs) != 1 || !reloaded.nodeCAs[0].cert.Equal(b.nodeCAs[0].cert) {
		t.Errorf("reloaded after the overlap: %d node CAs", len(reloaded.nodeCAs))
	}
	st, err := Status(ctx, pool, WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	var nodes []AuthorityStatus
	for _, a := range st.Authorities {
		if a.Kind == KindNode {
			nodes = append(nodes, a)
		}
	}
	if len(nodes) != 2 || !nodes[0].Issuer || nodes[0].Retired || nodes[1].Issuer || !nodes[1].Retired || nodes[1].RetiredAt == nil {
		t.Errorf("node CAs in status: %+v", nodes)
	}

	// Rotating with overlap 0 drops every older node CA at once, even one still in an overlap.
	clk.t = t0.Add(3 * time.Hour)
	b2, err := RotateNodeCA(ctx, pool, secret, 24*time.Hour, WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	if len(b2.nodeCAs) != 2 {
		t.Fatalf("%d node CAs after the second rotation, want 2", len(b2.nodeCAs))
	}
	b3, err := RotateNodeCA(ctx, pool, secret, 0, WithClock(clk.now))
	if err != nil {
		t.Fatal(err)
	}
	if len(b3.nodeCAs) != 1 {
		t.Errorf("%d node CAs after a rotation with no overlap, want 1", len(b3.nodeCAs))
	}
	if _, err := b3.VerifyNode(newChain); err == nil {
		t.Error("a certificate of a node CA rotated out with no overlap still verifies")
	}
	if _, err := RotateNodeCA(ctx, pool, secret, -time.Hour); err == nil {
		t.Error("a negative overlap was accepted")
	}
}

func TestStatusWarnsBeforeExpiry(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	t0 := time.Now()
	if _, err := Init(ctx, pool, secret, td); err != nil {
		t.Fatal(err)
	}
	for at, want := range map[time.Duration]int{
		CATTL - 40*24*time.Hour: 0,
		CATTL - 10*24*time.Hour: 2, // node and internal CAs
		CATTL + 24*time.Hour:    2, // expired
		RootTTL + time.Hour:     3,
	} {
		st, err := Status(ctx, pool, WithClock(func() time.Time { return t0.Add(at) }))
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Warnings) != want {
			t.Errorf("at +%s: %d warnings, want %d: %q", at, len(st.Warnings), want, st.Warnings)
		}
	}
}

// TestRootFromTheDatabase: pki status and pki export-root read the root and its pin without the
// secret, and they are the bundle's.
func TestRootFromTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	if _, err := RootPEM(ctx, pool); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("RootPEM before init: %v", err)
	}
	b, err := Init(ctx, pool, secret, td)
	if err != nil {
		t.Fatal(err)
	}
	root, err := RootPEM(ctx, pool)
	if err != nil || !bytes.Equal(root, b.RootPEM()) {
		t.Fatalf("RootPEM = %.40q, %v", root, err)
	}
	st, err := Status(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if pin, _ := cahash.OfPEM(root); st.RootCertHash != b.RootCertHash() || pin != b.RootCertHash() {
		t.Errorf("status pin %s, PEM's %s, bundle's %s", st.RootCertHash, pin, b.RootCertHash())
	}
}

func TestSPIFFEID(t *testing.T) {
	t.Parallel()
	certWith := func(uris ...string) *x509.Certificate {
		c := &x509.Certificate{}
		for _, s := range uris {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatal(err)
			}
			c.URIs = append(c.URIs, u)
		}
		return c
	}
	for _, ok := range []string{"spiffe://example.com/node/n1", "spiffe://a.b/gateway/eu/g-1", "spiffe://example.com/internal/api_1.x"} {
		if u, err := SPIFFEID(certWith(ok)); err != nil || u.String() != ok {
			t.Errorf("SPIFFEID(%s): %v, %v", ok, u, err)
		}
	}
	for _, bad := range [][]string{
		{},
		{"spiffe://example.com/node/a", "spiffe://example.com/node/b"},
		{"https://example.com/node/n1"},
		{"spiffe://Example.com/node/n1"},
		{"spiffe://example.com:8443/node/n1"},
		{"spiffe://user@example.com/node/n1"},
		{"spiffe://example.com"},
		{"spiffe://example.com/"},
		{"spiffe://example.com/node//n1"},
		{"spiffe://example.com/node/.."},
		{"spiffe://example.com/node/n1?x=1"},
		{"spiffe://example.com/node/n1#f"},
		{"spiffe://example.com/node/n%201"},
	} {
		if u, err := SPIFFEID(certWith(bad...)); err == nil {
			t.Errorf("SPIFFEID(%v) = %v, want an error", bad, u)
		}
	}
	if _, err := NodeID(certWith("spiffe://other.example/node/n1"), td); err == nil {
		t.Error("NodeID accepts another trust domain")
	}
	if _, err := NodeID(certWith("spiffe://example.com/gateway/eu/g1"), td); err == nil {
		t.Error("NodeID accepts a gateway identity")
	}
	if _, _, err := GatewayID(certWith("spiffe://example.com/node/n1"), td); err == nil {
		t.Error("GatewayID accepts a node identity")
	}
}

func TestJoinTickets(t *testing.T) {
	t.Parallel()
	b := initBundle(t)
	ticket := []byte("ticket")
	sig := b.SignJoinTicket(ticket)
	if !VerifyJoinTicket(b.JoinPublicKey(), ticket, sig) {
		t.Fatal("a join ticket does not verify")
	}
	if b.VerifyJoinTicket([]byte("tickeT"), sig) {
		t.Error("an altered ticket verifies")
	}
	// A plain Ed25519 signature by the same key is not a join ticket signature.
	if b.VerifyJoinTicket(ticket, ed25519.Sign(b.join, ticket)) {
		t.Error("a signature without the join context verifies")
	}
	if VerifyJoinTicket(nil, ticket, sig) {
		t.Error("verifies with no key")
	}
}
