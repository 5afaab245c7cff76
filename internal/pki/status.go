package pki

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/pki/cahash"
)

// StatusReport summarises the deployment's PKI from its public parts; it needs no secret.
type StatusReport struct {
	TrustDomain string `json:"trustDomain"`
	// RootCertHash is the root CA's pin (cahash.Of), for `bcd join --ca-cert-hash`.
	RootCertHash string            `json:"rootCertHash"`
	Authorities  []AuthorityStatus `json:"authorities"`
	// Warnings name authorities in use that expire within ExpiryWarning, or have expired.
	Warnings []string `json:"warnings"`
}

// AuthorityStatus is one authority. Status lists root, node, internal and join, each kind's
// issuer first, then newest first.
type AuthorityStatus struct {
	ID      string `json:"id"`
	Kind    string `json:"kind"` // KindRoot, KindNode, KindInternal or KindJoin
	Subject string `json:"subject"`
	// NotAfter is when the certificate expires; nil for the join key, which has none.
	NotAfter  *time.Time `json:"notAfter,omitempty"`
	CreatedAt time.Time  `json:"createdAt"`
	// RetiredAt is when a rotated-out authority stops (or stopped) being accepted.
	RetiredAt *time.Time `json:"retiredAt,omitempty"`
	// Issuer is true for the authority that issues for its kind now.
	Issuer bool `json:"issuer"`
	// Retired is true once RetiredAt has passed: the authority is no longer accepted.
	Retired bool `json:"retired"`
}

// Status reports the trust domain and every authority, with warnings for those in use that
// expire within 30 days. It returns ErrNotInitialized before Init.
func Status(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*StatusReport, error) {
	o := newOptions(opts)
	q := db.New(pool)
	set, err := q.GetPKISettings(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotInitialized
	} else if err != nil {
		return nil, fmt.Errorf("pki: read settings: %w", err)
	}
	rows, err := q.ListPKIAuthorities(ctx)
	if err != nil {
		return nil, fmt.Errorf("pki: read authorities: %w", err)
	}
	now := o.now()
	rep := &StatusReport{TrustDomain: set.TrustDomain, Authorities: []AuthorityStatus{}, Warnings: []string{}}
	for _, r := range rows {
		a := AuthorityStatus{
			ID: r.ID.String(), Kind: r.Kind, Subject: "JoinService Ed25519 key",
			NotAfter: r.NotAfter, CreatedAt: r.CreatedAt, RetiredAt: r.RetiredAt,
			Issuer: r.RetiredAt == nil, Retired: r.RetiredAt != nil && !now.Before(*r.RetiredAt),
		}
		if r.CertPem != nil {
			cert, err := parseCertPEM([]byte(*r.CertPem))
			if err != nil {
				return nil, fmt.Errorf("pki: the %s CA %s: %w", r.Kind, r.ID, err)
			}
			a.Subject = cert.Subject.CommonName
			if r.Kind == KindRoot && a.Issuer {
				rep.RootCertHash = cahash.Of(cert)
			}
		}
		rep.Authorities = append(rep.Authorities, a)
		if a.Retired || a.NotAfter == nil {
			continue
		}
		what := fmt.Sprintf("the %s CA %s", a.Kind, a.ID)
		switch left := a.NotAfter.Sub(now); {
		case left <= 0:
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s expired on %s", what, a.NotAfter.UTC().Format(time.RFC3339)))
		case left <= ExpiryWarning:
			hint := ""
			if a.Kind == KindNode && a.Issuer {
				hint = "; rotate it with `better-compute pki rotate-node-ca`"
			}
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s expires on %s (in %d days)%s",
				what, a.NotAfter.UTC().Format(time.RFC3339), int(left.Hours()/24), hint))
		}
	}
	return rep, nil
}

// RootPEM reads the root CA certificate (PEM) from the database; it needs no secret, since
// the certificate is public (`better-compute pki export-root`, joinTokens/create's pin). It
// returns ErrNotInitialized before Init.
func RootPEM(ctx context.Context, pool *pgxpool.Pool) ([]byte, error) {
	rows, err := db.New(pool).ListPKIAuthorities(ctx)
	if err != nil {
		return nil, fmt.Errorf("pki: read authorities: %w", err)
	}
	for _, r := range rows {
		if r.Kind == KindRoot && r.RetiredAt == nil && r.CertPem != nil {
			if _, err := parseCertPEM([]byte(*r.CertPem)); err != nil {
				return nil, fmt.Errorf("pki: the root CA %s: %w", r.ID, err)
			}
			return []byte(*r.CertPem), nil
		}
	}
	return nil, ErrNotInitialized
}
