package sso

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Provider is what an identity provider's discovery document says that sign-in needs.
type Provider struct {
	Issuer                      string
	AuthorizationEndpoint       string
	TokenEndpoint               string
	UserinfoEndpoint            string
	DeviceAuthorizationEndpoint string
	JWKSURI                     string
	// TokenEndpointAuthMethods are the client authentication methods the token endpoint takes
	// (client_secret_basic when the document names none, as OpenID Connect Discovery says).
	TokenEndpointAuthMethods []string
	// FetchedAt is when the document was fetched.
	FetchedAt time.Time
}

// document is the part of an OpenID Connect Discovery document that Provider keeps.
type document struct {
	Issuer                      string   `json:"issuer"`
	AuthorizationEndpoint       string   `json:"authorization_endpoint"`
	TokenEndpoint               string   `json:"token_endpoint"`
	UserinfoEndpoint            string   `json:"userinfo_endpoint"`
	DeviceAuthorizationEndpoint string   `json:"device_authorization_endpoint"`
	JWKSURI                     string   `json:"jwks_uri"`
	TokenEndpointAuthMethods    []string `json:"token_endpoint_auth_methods_supported"`
}

// DiscoveryPath is where, below an issuer, its discovery document is.
const DiscoveryPath = "/.well-known/openid-configuration"

// FailureTTL is how long a failed discovery is remembered: for this long after a fetch of an
// issuer's document failed, Provider answers that failure again without fetching, so a flood of
// sign-in starts against a provider that is down (or a tenant's issuer that never answers) costs
// the provider, and the API's egress, one fetch per FailureTTL.
const FailureTTL = 30 * time.Second

// Discovery caches providers' discovery documents by issuer: a document is fetched on first use,
// again once it is older than Options.DiscoveryTTL or when Refresh asks, and at most
// Options.MaxIssuers are kept (the least recently used go first). A failed fetch is remembered
// for FailureTTL (as many issuers at most), during which Provider answers it without fetching.
// Concurrent lookups of one issuer share one fetch. It is safe for concurrent use.
type Discovery struct {
	http *http.Client
	opts Options

	group    singleflight.Group
	mu       sync.Mutex
	entries  map[string]*discoveryEntry
	failures map[string]discoveryFailure
}

// discoveryFailure is a failed fetch of an issuer's document and when it failed.
type discoveryFailure struct {
	err error
	at  time.Time
}

type discoveryEntry struct {
	p    *Provider
	used time.Time
}

// NewDiscovery returns an empty Discovery with opts' HTTP client, TTL, bound and clock.
func NewDiscovery(opts Options) *Discovery {
	opts = opts.withDefaults()
	return newDiscovery(egressClient(opts.HTTPClient, opts.AllowPrivate, opts.Timeout), opts)
}

func newDiscovery(hc *http.Client, opts Options) *Discovery {
	return &Discovery{http: hc, opts: opts, entries: map[string]*discoveryEntry{}, failures: map[string]discoveryFailure{}}
}

// Provider returns issuer's provider, from the cache when its document is younger than the TTL,
// or the failure of its last fetch when that failed less than FailureTTL ago.
func (d *Discovery) Provider(ctx context.Context, issuer string) (*Provider, error) {
	if p, err, ok := d.cached(issuer); ok {
		return p, err
	}
	return d.shared(ctx, issuer, false)
}

// cached answers a lookup of issuer from memory: a fresh document, or a failure within
// FailureTTL; ok is false when there is neither.
func (d *Discovery) cached(issuer string) (p *Provider, err error, ok bool) {
	now := d.opts.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if e, ok := d.entries[issuer]; ok && now.Sub(e.p.FetchedAt) < d.opts.DiscoveryTTL {
		e.used = now
		return e.p, nil, true
	}
	if f, ok := d.failures[issuer]; ok && now.Sub(f.at) < FailureTTL {
		return nil, f.err, true
	}
	return nil, nil, false
}

// Refresh fetches issuer's discovery document now (sharing a fetch already under way) and caches
// it, or its failure. The document's issuer must be issuer exactly, and it must name a jwks_uri.
func (d *Discovery) Refresh(ctx context.Context, issuer string) (*Provider, error) {
	return d.shared(ctx, issuer, true)
}

// shared fetches issuer's document in a flight that concurrent callers share. Unless force is
// set, the flight first looks at the cache again: a lookup that found nothing fresh may reach
// here just after another lookup's flight stored a document or a failure, and must not fetch
// once more.
func (d *Discovery) shared(ctx context.Context, issuer string, force bool) (*Provider, error) {
	key := issuer
	if force {
		key = "refresh " + issuer
	}
	ch := d.group.DoChan(key, func() (any, error) {
		if p, err, ok := d.cached(issuer); ok && !force {
			return p, err
		}
		p, err := d.fetch(context.WithoutCancel(ctx), issuer)
		if err != nil {
			d.opts.Logger.Warn("sso: discovery failed", slog.String("issuer", issuer), slog.Any("error", err))
			d.storeFailure(issuer, err)
			return nil, err
		}
		d.store(p)
		return p, nil
	})
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("discovery of %s: %w", issuer, ctx.Err())
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Provider), nil
	}
}

// Forget drops issuer's document and remembered failure, so that its next use fetches it.
func (d *Discovery) Forget(issuer string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.entries, issuer)
	delete(d.failures, issuer)
}

func (d *Discovery) fetch(ctx context.Context, issuer string) (*Provider, error) {
	if issuer == "" {
		return nil, fmt.Errorf("%w: no issuer", ErrMethod)
	}
	var doc document
	if err := getJSON(ctx, d.http, strings.TrimSuffix(issuer, "/")+DiscoveryPath, "", &doc); err != nil {
		return nil, fmt.Errorf("%w: discovery of %s: %w", ErrProvider, issuer, err)
	}
	if doc.Issuer != issuer {
		return nil, fmt.Errorf("%w: discovery of %s: the document's issuer is %q", ErrProvider, issuer, doc.Issuer)
	}
	if doc.JWKSURI == "" {
		return nil, fmt.Errorf("%w: discovery of %s: the document has no jwks_uri", ErrProvider, issuer)
	}
	return &Provider{
		Issuer:                      doc.Issuer,
		AuthorizationEndpoint:       doc.AuthorizationEndpoint,
		TokenEndpoint:               doc.TokenEndpoint,
		UserinfoEndpoint:            doc.UserinfoEndpoint,
		DeviceAuthorizationEndpoint: doc.DeviceAuthorizationEndpoint,
		JWKSURI:                     doc.JWKSURI,
		TokenEndpointAuthMethods:    doc.TokenEndpointAuthMethods,
		FetchedAt:                   d.opts.Now(),
	}, nil
}

func (d *Discovery) store(p *Provider) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.entries[p.Issuer]; !ok && len(d.entries) >= d.opts.MaxIssuers {
		var oldest string
		var at time.Time
		for iss, e := range d.entries {
			if oldest == "" || e.used.Before(at) {
				oldest, at = iss, e.used
			}
		}
		delete(d.entries, oldest)
	}
	d.entries[p.Issuer] = &discoveryEntry{p: p, used: p.FetchedAt}
	delete(d.failures, p.Issuer)
}

// storeFailure remembers that fetching issuer's document failed with err, keeping at most
// MaxIssuers failures: expired ones go first, then the oldest.
func (d *Discovery) storeFailure(issuer string, err error) {
	now := d.opts.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.failures[issuer]; !ok && len(d.failures) >= d.opts.MaxIssuers {
		var oldest string
		var at time.Time
		for iss, f := range d.failures {
			if now.Sub(f.at) >= FailureTTL {
				delete(d.failures, iss)
				continue
			}
			if oldest == "" || f.at.Before(at) {
				oldest, at = iss, f.at
			}
		}
		if len(d.failures) >= d.opts.MaxIssuers {
			delete(d.failures, oldest)
		}
	}
	d.failures[issuer] = discoveryFailure{err: err, at: now}
}
