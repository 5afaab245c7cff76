// Package pki is the machine PKI of a deployment: the certificate authorities that give nodes,
// gateways and internal services their SPIFFE identities, and the JoinService key that signs
// join tickets.
//
// Every key is ECDSA P-256 (the JoinService key is Ed25519) and every certificate is made with
// crypto/x509. The authorities live in PostgreSQL (pki_settings, pki_authorities) with their
// private keys sealed under the deployment secret, so every process that has the secret can
// load the same [Bundle], and the database alone gives none of them away.
//
// The hierarchy: a root CA (10 years), which daemons receive at join and trust; under it a node
// CA (2 years, client certificates only) that signs node certificates, and an internal CA (2
// years) that signs the mTLS certificates of the internal control API. The root signs gateway
// serving certificates itself (see [Bundle.IssueGateway]). The node CA rotates with an overlap
// ([RotateNodeCA]); while the overlap lasts, certificates of both node CAs are accepted.
package pki

import (
	"bytes"
	"context"
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
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/pki/cahash"
	"github.com/better-compute/better-compute/internal/seal"
)

// Kinds of authority, as stored in pki_authorities.kind and reported by [Status].
const (
	KindRoot     = "root"     // the root CA: signs the other CAs and gateway certificates
	KindNode     = "node"     // a node CA: signs node client certificates; several during rotation
	KindInternal = "internal" // the internal CA: signs internal API client and server certificates
	KindJoin     = "join"     // the JoinService Ed25519 key: signs join tickets; no certificate
)

// Lifetimes of what the package issues.
const (
	RootTTL        = 10 * 365 * 24 * time.Hour // the root CA
	CATTL          = 2 * 365 * 24 * time.Hour  // node and internal CAs, capped by the root's end
	DefaultNodeTTL = 24 * time.Hour            // node certificates when IssueNode gets ttl 0
	GatewayTTL     = 365 * 24 * time.Hour      // gateway serving certificates
	InternalTTL    = 90 * 24 * time.Hour       // internal API certificates
	// ExpiryWarning is how long before an authority expires Status starts warning.
	ExpiryWarning = 30 * 24 * time.Hour
	// clockSkew backdates NotBefore, so a certificate is valid at once on a host whose clock is
	// a little behind.
	clockSkew = 5 * time.Minute
)

// sealPurpose is the seal purpose of every private key of the PKI.
const sealPurpose = "pki"

var (
	// ErrInitialized is returned by Init when the deployment's PKI exists for another trust
	// domain. (Init for the same trust domain is a no-op that returns the existing bundle.)
	ErrInitialized = errors.New("pki: already initialised")
	// ErrNotInitialized is returned when the deployment has no PKI yet.
	ErrNotInitialized = errors.New("pki: not initialised; run `better-compute pki init --trust-domain <domain>`")
	// ErrWrongSecret is returned when the stored keys do not open under the given secret. It
	// wraps seal.ErrOpen.
	ErrWrongSecret error = wrongSecret{}
)

type wrongSecret struct{}

func (wrongSecret) Error() string { return "pki: cannot open the PKI bundle: wrong deployment secret?" }
func (wrongSecret) Unwrap() error { return seal.ErrOpen }

// Option changes how Init, Load, RotateNodeCA and Status behave; for tests.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock makes the bundle read the time from now instead of time.Now: when certificates
// start and end, and which rotated-out node CAs are still accepted.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

func newOptions(opts []Option) options {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Bundle is a deployment's loaded PKI: the certificates of its authorities and the private keys
// of the current issuers. It never changes once loaded and is safe for concurrent use; load it
// again to see a rotation made elsewhere.
type Bundle struct {
	trustDomain string
	now         func() time.Time
	root        *authority
	nodeCAs     []*authority // the issuer first, then rotated-out ones still in their overlap
	internal    *authority
	join        ed25519.PrivateKey
}

// authority is one row of pki_authorities, parsed.
type authority struct {
	id        uuid.UUID
	kind      string
	cert      *x509.Certificate // nil for the join key
	certPEM   []byte
	key       crypto.Signer // nil when not opened (a rotated-out CA does not issue)
	retiredAt *time.Time
}

// TrustDomain is the SPIFFE trust domain of every identity the bundle issues.
func (b *Bundle) TrustDomain() string { return b.trustDomain }

// RootPEM is the root CA certificate, PEM: what daemons get at join to verify gateways.
func (b *Bundle) RootPEM() []byte { return bytes.Clone(b.root.certPEM) }

// RootCertHash is the root CA's pin, "sha256:<hex>" of its public key (cahash.Of): what
// `bcd join --ca-cert-hash` checks the root it fetches from a gateway against.
func (b *Bundle) RootCertHash() string { return cahash.Of(b.root.cert) }

// RootPool is a pool holding only the root CA, for verifying gateway certificates.
func (b *Bundle) RootPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(b.root.cert)
	return p
}

// NodeCAPool holds every node CA accepted now: the issuer and the rotated-out ones whose
// overlap has not ended. Gateways verify node client certificates against it (not against the
// root, which also anchors gateway and internal certificates). Call it per handshake, or at
// least periodically, since an overlap ends with time.
func (b *Bundle) NodeCAPool() *x509.CertPool {
	now := b.now()
	p := x509.NewCertPool()
	for _, a := range b.nodeCAs {
		if a.retiredAt == nil || now.Before(*a.retiredAt) {
			p.AddCert(a.cert)
		}
	}
	return p
}

// NodeCAPoolUntil is NodeCAPool with the moment it next changes, by the bundle's clock: when
// the overlap of a rotated-out node CA ends (zero when none will). A gateway keeps the pool, and
// the TLS configuration it builds from it, until then rather than building one per handshake.
func (b *Bundle) NodeCAPoolUntil() (*x509.CertPool, time.Time) {
	now := b.now()
	p := x509.NewCertPool()
	var until time.Time
	for _, a := range b.nodeCAs {
		if a.retiredAt == nil || now.Before(*a.retiredAt) {
			p.AddCert(a.cert)
			if a.retiredAt != nil && (until.IsZero() || a.retiredAt.Before(until)) {
				until = *a.retiredAt
			}
		}
	}
	return p, until
}

// InternalCAPool holds the internal CA, for both sides of the internal control API's mTLS.
func (b *Bundle) InternalCAPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(b.internal.cert)
	return p
}

// Init creates the deployment's PKI for trustDomain: a root CA, a node CA, an internal CA and
// the JoinService key, every private key sealed under secret, all stored in one transaction.
// On a deployment already initialised for the same trust domain it changes nothing and returns
// the existing bundle (so dev mode and scripts can run it every time); for another trust domain
// it returns ErrInitialized. Concurrent calls are safe: one creates, the others load.
func Init(ctx context.Context, pool *pgxpool.Pool, secret, trustDomain string, opts ...Option) (*Bundle, error) {
	if err := ValidateTrustDomain(trustDomain); err != nil {
		return nil, err
	}
	s, err := seal.New(secret, sealPurpose)
	if err != nil {
		return nil, err
	}
	o := newOptions(opts)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q := db.New(tx)
	if _, err := q.InsertPKISettings(ctx, trustDomain); errors.Is(err, pgx.ErrNoRows) {
		_ = tx.Rollback(ctx)
		set, err := db.New(pool).GetPKISettings(ctx)
		if err != nil {
			return nil, fmt.Errorf("pki: read settings: %w", err)
		}
		if set.TrustDomain != trustDomain {
			return nil, fmt.Errorf("%w for trust domain %q, not %q", ErrInitialized, set.TrustDomain, trustDomain)
		}
		return Load(ctx, pool, secret, opts...)
	} else if err != nil {
		return nil, fmt.Errorf("pki: store settings: %w", err)
	}
	now := o.now()
	root, err := newCA(KindRoot, trustDomain, now, nil)
	if err != nil {
		return nil, err
	}
	node, err := newCA(KindNode, trustDomain, now, root)
	if err != nil {
		return nil, err
	}
	internal, err := newCA(KindInternal, trustDomain, now, root)
	if err != nil {
		return nil, err
	}
	_, joinKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate the join key: %w", err)
	}
	join := &authority{id: uuid.New(), kind: KindJoin, key: joinKey}
	for _, a := range []*authority{root, node, internal, join} {
		if err := store(ctx, q, s, a); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return Load(ctx, pool, secret, opts...)
}

// Load reads the deployment's PKI and opens the issuers' keys with secret. It returns
// ErrNotInitialized before Init, and ErrWrongSecret when the keys do not open.
func Load(ctx context.Context, pool *pgxpool.Pool, secret string, opts ...Option) (*Bundle, error) {
	s, err := seal.New(secret, sealPurpose)
	if err != nil {
		return nil, err
	}
	o := newOptions(opts)
	q := db.New(pool)
	set, err := q.GetPKISettings(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotInitialized
	} else if err != nil {
		return nil, fmt.Errorf("pki: read settings: %w", err)
	}
	rows, err := q.ListLivePKIAuthorities(ctx, o.now())
	if err != nil {
		return nil, fmt.Errorf("pki: read authorities: %w", err)
	}
	b := &Bundle{trustDomain: set.TrustDomain, now: o.now}
	for _, r := range rows {
		a, err := parse(r, s)
		if err != nil {
			return nil, err
		}
		issuer := r.RetiredAt == nil
		switch {
		case a.kind == KindNode:
			b.nodeCAs = append(b.nodeCAs, a) // the query orders the issuer first
		case !issuer:
			// Only node CAs rotate; nothing else is accepted once retired.
		case a.kind == KindRoot:
			b.root = a
		case a.kind == KindInternal:
			b.internal = a
		case a.kind == KindJoin:
			k, ok := a.key.(ed25519.PrivateKey)
			if !ok {
				return nil, fmt.Errorf("pki: the join key %s is not Ed25519", a.id)
			}
			b.join = k
		}
	}
	if b.root == nil || b.internal == nil || b.join == nil || len(b.nodeCAs) == 0 || b.nodeCAs[0].retiredAt != nil {
		return nil, errors.New("pki: the stored PKI is incomplete: an issuer is missing")
	}
	return b, nil
}

// RotateNodeCA makes a new node CA, signed by the root, the issuer of node certificates. Every
// older node CA stays accepted (in NodeCAPool) until now+overlap at the latest, then is
// retired; overlap 0 retires them at once (after a compromise). Nodes renew onto the new CA
// during the overlap, so it should exceed the node certificate lifetime. Other processes see
// the new CA when they load the bundle again.
func RotateNodeCA(ctx context.Context, pool *pgxpool.Pool, secret string, overlap time.Duration, opts ...Option) (*Bundle, error) {
	if overlap < 0 {
		return nil, fmt.Errorf("pki: the overlap must not be negative, got %s", overlap)
	}
	s, err := seal.New(secret, sealPurpose)
	if err != nil {
		return nil, err
	}
	o := newOptions(opts)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	q := db.New(tx)
	set, err := q.LockPKISettings(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotInitialized
	} else if err != nil {
		return nil, fmt.Errorf("pki: read settings: %w", err)
	}
	now := o.now()
	rows, err := q.ListLivePKIAuthorities(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("pki: read authorities: %w", err)
	}
	var root *authority
	for _, r := range rows {
		if r.Kind == KindRoot && r.RetiredAt == nil {
			if root, err = parse(r, s); err != nil {
				return nil, err
			}
		}
	}
	if root == nil {
		return nil, errors.New("pki: the stored PKI has no root CA")
	}
	node, err := newCA(KindNode, set.TrustDomain, now, root)
	if err != nil {
		return nil, err
	}
	if err := q.RetirePKIAuthorities(ctx, db.RetirePKIAuthoritiesParams{Kind: KindNode, Until: now.Add(overlap)}); err != nil {
		return nil, fmt.Errorf("pki: retire the node CA: %w", err)
	}
	if err := store(ctx, q, s, node); err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return Load(ctx, pool, secret, opts...)
}

// newCA makes a CA certificate and key of kind; parent nil makes a self-signed root.
func newCA(kind, td string, now time.Time, parent *authority) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generate the %s CA key: %w", kind, err)
	}
	tmpl := &x509.Certificate{
		Subject: pkix.Name{
			Organization: []string{"Better Compute"},
			// The date tells rotated node CAs apart.
			CommonName: fmt.Sprintf("Better Compute %s CA %s %s", kind, td, now.UTC().Format("2006-01-02")),
		},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CATTL),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true, // intermediates sign leaves only
	}
	switch kind {
	case KindRoot:
		tmpl.NotAfter = now.Add(RootTTL)
		tmpl.MaxPathLen, tmpl.MaxPathLenZero = 1, false
	case KindNode:
		// x509 verification nests extended key usages: a node CA cannot make a server cert.
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	case KindInternal:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.cert, parent.key
		tmpl.NotAfter = minTime(tmpl.NotAfter, parent.cert.NotAfter)
		if !now.Before(parent.cert.NotAfter) {
			return nil, errors.New("pki: the root CA has expired")
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("pki: make the %s CA: %w", kind, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse the %s CA: %w", kind, err)
	}
	return &authority{id: uuid.New(), kind: kind, cert: cert, certPEM: certPEM(der), key: key}, nil
}

// aad binds a sealed key to its row, so keys cannot be swapped between rows.
func aad(id uuid.UUID, kind string) []byte {
	return []byte("pki_authorities/" + id.String() + "/" + kind)
}

// store inserts a new issuer with its key sealed.
func store(ctx context.Context, q *db.Queries, s *seal.Sealer, a *authority) error {
	der, err := x509.MarshalPKCS8PrivateKey(a.key)
	if err != nil {
		return fmt.Errorf("pki: encode the %s key: %w", a.kind, err)
	}
	pub, err := x509.MarshalPKIXPublicKey(a.key.Public())
	if err != nil {
		return fmt.Errorf("pki: encode the %s public key: %w", a.kind, err)
	}
	p := db.InsertPKIAuthorityParams{ID: a.id, Kind: a.kind, PublicKey: pub, SealedKey: s.Seal(der, aad(a.id, a.kind))}
	if a.cert != nil {
		pemText := string(a.certPEM)
		p.CertPem, p.NotAfter = &pemText, &a.cert.NotAfter
	}
	if err := q.InsertPKIAuthority(ctx, p); err != nil {
		return fmt.Errorf("pki: store the %s authority: %w", a.kind, err)
	}
	return nil
}

// parse reads a row's certificate, and opens its key when it is an issuer, checking that the
// key, the certificate and the stored public key agree.
func parse(r db.PkiAuthority, s *seal.Sealer) (*authority, error) {
	a := &authority{id: r.ID, kind: r.Kind, retiredAt: r.RetiredAt}
	if r.CertPem != nil {
		cert, err := parseCertPEM([]byte(*r.CertPem))
		if err != nil {
			return nil, fmt.Errorf("pki: the %s CA %s: %w", r.Kind, r.ID, err)
		}
		if !bytes.Equal(cert.RawSubjectPublicKeyInfo, r.PublicKey) {
			return nil, fmt.Errorf("pki: the %s CA %s does not match its public key", r.Kind, r.ID)
		}
		a.cert, a.certPEM = cert, []byte(*r.CertPem)
	}
	if r.RetiredAt != nil {
		return a, nil
	}
	der, err := s.Open(r.SealedKey, aad(r.ID, r.Kind))
	if err != nil {
		return nil, ErrWrongSecret
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("pki: the %s key %s: %w", r.Kind, r.ID, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("pki: the %s key %s cannot sign", r.Kind, r.ID)
	}
	pub, err := x509.MarshalPKIXPublicKey(signer.Public())
	if err != nil || !bytes.Equal(pub, r.PublicKey) {
		return nil, fmt.Errorf("pki: the %s key %s does not match its public key", r.Kind, r.ID)
	}
	a.key = signer
	return a, nil
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func parseCertPEM(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("not a PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
