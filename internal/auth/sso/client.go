package sso

import (
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultDiscoveryTTL = time.Hour
	DefaultCooldown     = 5 * time.Minute
	DefaultKeyMaxAge    = time.Hour
	DefaultMaxIssuers   = 256
	DefaultMaxKeySets   = 256
)

// Options configure a Client (and a Discovery or KeySet made on their own). The zero value is
// usable: every field has a default.
type Options struct {
	// HTTPClient sends every request; nil means webhook.NewClient(AllowPrivate, 4). Whatever the
	// client, each request's URL must pass webhook.CheckURL(url, AllowPrivate), answers are cut
	// at MaxResponseBytes and requests time out after Timeout; but only webhook.NewClient's dialer
	// also refuses names that resolve to private addresses, so an injected client is for tests.
	HTTPClient *http.Client
	// AllowPrivate lets identity providers live on loopback and private addresses (the
	// deployment's webhooks.allowPrivate, or tests).
	AllowPrivate bool
	// Timeout bounds each request (default 10 s).
	Timeout time.Duration
	// DiscoveryTTL is how long a discovery document is used before it is fetched again (default
	// 1 h).
	DiscoveryTTL time.Duration
	// MaxIssuers bounds the discovery documents kept; the least recently used go first.
	MaxIssuers int
	// Cooldown is the least time between two fetches of one key set (default 5 min): a token
	// with an unknown key id fails at once when the keys were fetched more recently.
	Cooldown time.Duration
	// KeyMaxAge is how long keys are trusted before they are fetched again at their next use, so
	// a key the provider withdrew stops verifying (default 1 h).
	KeyMaxAge time.Duration
	// MaxKeySets bounds the key sets kept, by JWKS URL; the least recently used go first.
	MaxKeySets int
	// Now is the clock (default time.Now); tests move it.
	Now func() time.Time
	// Logger receives failed fetches (default slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DiscoveryTTL <= 0 {
		o.DiscoveryTTL = DefaultDiscoveryTTL
	}
	if o.MaxIssuers <= 0 {
		o.MaxIssuers = DefaultMaxIssuers
	}
	if o.Cooldown <= 0 {
		o.Cooldown = DefaultCooldown
	}
	if o.KeyMaxAge <= 0 {
		o.KeyMaxAge = DefaultKeyMaxAge
	}
	if o.MaxKeySets <= 0 {
		o.MaxKeySets = DefaultMaxKeySets
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Client verifies identity providers' tokens and runs the OAuth flows against them. One Client
// serves every tenant's auth methods: it caches discovery documents by issuer and key sets by
// JWKS URL, both bounded. It is safe for concurrent use.
type Client struct {
	opts      Options
	http      *http.Client
	discovery *Discovery

	mu      sync.Mutex
	keySets map[string]*keySetEntry
}

type keySetEntry struct {
	ks   *KeySet
	used time.Time
}

// New returns a Client with opts' settings.
func New(opts Options) *Client {
	opts = opts.withDefaults()
	hc := egressClient(opts.HTTPClient, opts.AllowPrivate, opts.Timeout)
	return &Client{
		opts:      opts,
		http:      hc,
		discovery: newDiscovery(hc, opts),
		keySets:   map[string]*keySetEntry{},
	}
}

// Discovery returns the Client's discovery cache, to look providers up or refresh them.
func (c *Client) Discovery() *Discovery { return c.discovery }

// KeySet returns the key set at jwksURL, made on first use and kept (bounded by MaxKeySets), so
// its cool-down holds across tokens.
func (c *Client) KeySet(jwksURL string) *KeySet {
	now := c.opts.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.keySets[jwksURL]; ok {
		e.used = now
		return e.ks
	}
	if len(c.keySets) >= c.opts.MaxKeySets {
		var oldest string
		var at time.Time
		for u, e := range c.keySets {
			if oldest == "" || e.used.Before(at) {
				oldest, at = u, e.used
			}
		}
		delete(c.keySets, oldest)
	}
	ks := newKeySet(jwksURL, c.http, c.opts)
	c.keySets[jwksURL] = &keySetEntry{ks: ks, used: now}
	return ks
}
