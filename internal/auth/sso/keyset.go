package sso

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// Algorithms are the signature algorithms a token may use: asymmetric ones only, so that a key
// published in a JWKS can never serve as an HMAC secret, and never "none".
var Algorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

var _ oidc.KeySet = (*KeySet)(nil)

// KeySet verifies JWS signatures with the keys published at a JWKS URL; it implements go-oidc's
// oidc.KeySet. Keys are fetched on first use, and again when a token names a key id the set
// does not hold or the keys are older than Options.KeyMaxAge, but never twice within
// Options.Cooldown: a token with an unknown key id fails at once (ErrUnknownKey) while the set
// cools down, so a flood of bogus tokens costs at most one fetch per cool-down, while a key the
// provider rotated in is picked up once the cool-down allows. A token naming a known key whose
// signature does not verify (ErrBadSignature) fetches nothing. Concurrent callers share one
// fetch. It is safe for concurrent use.
type KeySet struct {
	url  string
	http *http.Client
	opts Options

	fetches atomic.Int64

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	fetchedAt time.Time     // of the keys held; zero before the first successful fetch
	attemptAt time.Time     // of the last fetch, successful or not
	lastErr   error         // of the last fetch; nil when it succeeded
	inflight  chan struct{} // closed when the fetch under way ends; nil when none is
}

// NewKeySet returns a key set for jwksURL with opts' HTTP client, cool-down and clock. A Client
// keeps its own key sets (Client.KeySet); this is for using one on its own.
func NewKeySet(jwksURL string, opts Options) *KeySet {
	opts = opts.withDefaults()
	return newKeySet(jwksURL, egressClient(opts.HTTPClient, opts.AllowPrivate, opts.Timeout), opts)
}

func newKeySet(jwksURL string, hc *http.Client, opts Options) *KeySet {
	return &KeySet{url: jwksURL, http: hc, opts: opts}
}

// URL is where the keys are fetched from.
func (k *KeySet) URL() string { return k.url }

// Fetches counts the fetches of the key set so far (successful or not).
func (k *KeySet) Fetches() int64 { return k.fetches.Load() }

// header is the part of a JWS protected header that picks the key.
type header struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// VerifySignature checks that jwt, in JWS compact serialization, is signed with one of
// Algorithms by one of the set's keys, and returns its payload. The key is the one the header's
// kid names, or when it names none any key of the set that fits the algorithm.
func (k *KeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	h, err := parseHeader(jwt)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(Algorithms, jose.SignatureAlgorithm(h.Alg)) {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedAlgorithm, h.Alg)
	}
	jws, err := jose.ParseSignedCompact(jwt, Algorithms)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("%w: %d signatures", ErrMalformed, len(jws.Signatures))
	}
	keys, err := k.keysFor(ctx, h.Kid, h.Alg)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if payload, err := jws.Verify(key.Key); err == nil {
			return payload, nil
		}
	}
	return nil, fmt.Errorf("%w (key id %q)", ErrBadSignature, h.Kid)
}

// parseHeader decodes the protected header of a compact JWS.
func parseHeader(jwt string) (header, error) {
	var h header
	enc, _, ok := strings.Cut(jwt, ".")
	if !ok || strings.Count(jwt, ".") != 2 {
		return h, fmt.Errorf("%w: not a compact JWS", ErrMalformed)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return h, fmt.Errorf("%w: header: %w", ErrMalformed, err)
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, fmt.Errorf("%w: header: %w", ErrMalformed, err)
	}
	return h, nil
}

// keysFor returns the keys that may have signed a token with kid and alg, fetching the set when
// it is missing them (or is old) and the cool-down allows.
func (k *KeySet) keysFor(ctx context.Context, kid, alg string) ([]jose.JSONWebKey, error) {
	for {
		k.mu.Lock()
		now := k.opts.Now()
		found := k.match(kid, alg)
		fresh := !k.fetchedAt.IsZero() && now.Sub(k.fetchedAt) < k.opts.KeyMaxAge
		if len(found) > 0 && fresh {
			k.mu.Unlock()
			return found, nil
		}
		if ch := k.inflight; ch != nil {
			k.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, fmt.Errorf("keys at %s: %w", k.url, ctx.Err())
			}
		}
		if !k.attemptAt.IsZero() && now.Sub(k.attemptAt) < k.opts.Cooldown {
			lastErr, never := k.lastErr, k.fetchedAt.IsZero()
			k.mu.Unlock()
			switch {
			case len(found) > 0:
				return found, nil
			case never && lastErr != nil:
				return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, lastErr)
			}
			return nil, fmt.Errorf("%w: key id %q", ErrUnknownKey, kid)
		}
		ch := make(chan struct{})
		k.inflight, k.attemptAt = ch, now
		k.mu.Unlock()

		keys, err := k.fetch(context.WithoutCancel(ctx))

		k.mu.Lock()
		if err == nil {
			k.keys, k.fetchedAt = keys, k.opts.Now()
		} else {
			k.opts.Logger.Warn("sso: key set fetch failed", slog.String("url", k.url), slog.Any("error", err))
		}
		k.lastErr, k.inflight = err, nil
		close(ch)
		k.mu.Unlock()
	}
}

// match returns the held keys that fit kid (any when empty) and alg. Called with k.mu held.
func (k *KeySet) match(kid, alg string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, key := range k.keys {
		if (kid == "" || key.KeyID == kid) && (key.Algorithm == "" || key.Algorithm == alg) {
			out = append(out, key)
		}
	}
	return out
}

// fetch reads the JWKS, keeping the public signing keys it holds and skipping keys it cannot
// use (another kty, an encryption key, a private or symmetric key) rather than failing on them.
func (k *KeySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	k.fetches.Add(1)
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, k.http, k.url, "", &set); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil || !key.Valid() || !key.IsPublic() ||
			(key.Use != "" && key.Use != "sig") {
			continue
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("keys at %s: no usable signing key", k.url)
	}
	return keys, nil
}
