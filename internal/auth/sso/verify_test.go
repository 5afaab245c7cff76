package sso

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/better-compute/better-compute/internal/webhook"
)

func TestVerifyIDToken(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	clk := newClock()
	c := New(Options{AllowPrivate: true, Now: clk.Now})
	now := clk.Now()
	k := ti.key()
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tampered := func() string {
		good := strings.Split(k.sign(t, ti.claims(now, nil)), ".")
		evil := strings.Split(k.sign(t, ti.claims(now, map[string]any{"sub": "admin"})), ".")
		return good[0] + "." + evil[1] + "." + good[2]
	}
	tests := []struct {
		name  string
		raw   string
		nonce string
		want  error
	}{
		{"good", k.sign(t, ti.claims(now, nil)), "n", nil},
		{"audience list", k.sign(t, ti.claims(now, map[string]any{"aud": []string{"other", "client"}})), "n", nil},
		{"expired within leeway", k.sign(t, ti.claims(now, map[string]any{"exp": now.Add(-30 * time.Second).Unix()})), "n", nil},
		{"wrong audience", k.sign(t, ti.claims(now, map[string]any{"aud": "other"})), "n", ErrWrongAudience},
		{"wrong azp", k.sign(t, ti.claims(now, map[string]any{"aud": []string{"other", "client"}, "azp": "other"})), "n", ErrWrongAudience},
		{"expired", k.sign(t, ti.claims(now, map[string]any{"exp": now.Add(-2 * time.Minute).Unix()})), "n", ErrExpired},
		{"no exp", k.sign(t, ti.claims(now, map[string]any{"exp": nil})), "n", ErrMissingClaim},
		{"no iat", k.sign(t, ti.claims(now, map[string]any{"iat": nil})), "n", ErrMissingClaim},
		{"issued in the future", k.sign(t, ti.claims(now, map[string]any{"iat": now.Add(2 * time.Minute).Unix()})), "n", ErrNotYetValid},
		{"not before", k.sign(t, ti.claims(now, map[string]any{"nbf": now.Add(2 * time.Minute).Unix()})), "n", ErrNotYetValid},
		{"nonce mismatch", k.sign(t, ti.claims(now, nil)), "other", ErrNonceMismatch},
		{"nonce missing", k.sign(t, ti.claims(now, map[string]any{"nonce": nil})), "n", ErrNonceMismatch},
		{"no sub", k.sign(t, ti.claims(now, map[string]any{"sub": nil})), "n", ErrMissingClaim},
		{"wrong issuer", k.sign(t, ti.claims(now, map[string]any{"iss": "https://evil.example"})), "n", ErrWrongIssuer},
		{"tampered payload", tampered(), "n", ErrBadSignature},
		{"known kid, other key", sign(t, jose.ES256, other, k.kid, ti.claims(now, nil)), "n", ErrBadSignature},
		{"HS256", sign(t, jose.HS256, []byte(strings.Repeat("s", 32)), k.kid, ti.claims(now, nil)), "n", ErrUnsupportedAlgorithm},
		{"alg none", "eyJhbGciOiJub25lIn0." + strings.Split(k.sign(t, ti.claims(now, nil)), ".")[1] + ".", "n", ErrUnsupportedAlgorithm},
		{"not a JWT", "garbage", "n", ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			claims, err := c.VerifyIDToken(t.Context(), ti.oidcMethod(), tt.raw, tt.nonce)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err != nil {
				if Reason(err) != tt.want.Error() {
					t.Errorf("Reason = %q, want %q", Reason(err), tt.want.Error())
				}
				return
			}
			if claims.Subject() != "user-1" || claims.Issuer() != ti.URL() {
				t.Errorf("claims = %v", claims)
			}
		})
	}
}

func TestVerifyIDTokenRefusesOtherKinds(t *testing.T) {
	t.Parallel()
	c := New(Options{AllowPrivate: true})
	_, err := c.VerifyIDToken(t.Context(), Method{Kind: KindJWT, Issuer: "https://x.example", ClientID: "c"}, "a.b.c", "")
	if !errors.Is(err, ErrMethod) {
		t.Fatalf("err = %v, want ErrMethod", err)
	}
}

func TestVerifyJWT(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	clk := newClock()
	c := New(Options{AllowPrivate: true, Now: clk.Now})
	now := clk.Now()
	k := ti.key()
	viaDiscovery := Method{Kind: KindJWT, Issuer: ti.URL(), Audiences: []string{"bc", "other"}}
	viaJWKS := Method{Kind: KindJWT, Issuer: ti.URL(), JWKSURL: ti.URL() + "/jwks", Audiences: []string{"bc"}}
	base := func(over map[string]any) map[string]any {
		c := ti.claims(now, map[string]any{"aud": "bc", "nonce": nil, "iat": nil})
		for k, v := range over {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	tests := []struct {
		name string
		m    Method
		raw  string
		want error
	}{
		{"discovery", viaDiscovery, k.sign(t, base(nil)), nil},
		{"jwks url", viaJWKS, k.sign(t, base(nil)), nil},
		// A JWKS URL does not make iss free: the method's keys sign as its issuer only (issue 31).
		{"jwks url, another issuer", viaJWKS, k.sign(t, base(map[string]any{"iss": "https://ci.example"})), ErrWrongIssuer},
		{"jwks url, no issuer", Method{Kind: KindJWT, JWKSURL: ti.URL() + "/jwks", Audiences: []string{"bc"}}, k.sign(t, base(nil)), ErrMethod},
		{"one of the audiences", viaDiscovery, k.sign(t, base(map[string]any{"aud": []string{"x", "other"}})), nil},
		{"wrong audience", viaDiscovery, k.sign(t, base(map[string]any{"aud": "x"})), ErrWrongAudience},
		{"wrong issuer", viaDiscovery, k.sign(t, base(map[string]any{"iss": "https://ci.example"})), ErrWrongIssuer},
		{"no exp", viaJWKS, k.sign(t, base(map[string]any{"exp": nil})), ErrMissingClaim},
		{"expired", viaJWKS, k.sign(t, base(map[string]any{"exp": now.Add(-61 * time.Second).Unix()})), ErrExpired},
		{"not before", viaJWKS, k.sign(t, base(map[string]any{"nbf": now.Add(61 * time.Second).Unix()})), ErrNotYetValid},
		{"nbf within leeway", viaJWKS, k.sign(t, base(map[string]any{"nbf": now.Add(30 * time.Second).Unix()})), nil},
		{"exp not a number", viaJWKS, k.sign(t, base(map[string]any{"exp": "tomorrow"})), ErrMalformed},
		{"no audiences", Method{Kind: KindJWT, JWKSURL: ti.URL() + "/jwks"}, k.sign(t, base(nil)), ErrMethod},
		{"no keys", Method{Kind: KindJWT, Audiences: []string{"bc"}}, k.sign(t, base(nil)), ErrMethod},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := c.VerifyJWT(t.Context(), tt.m, tt.raw)
			if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// A flood of tokens naming unknown key ids costs one JWKS fetch per cool-down, however many
// arrive at once; they fail at once and good tokens keep verifying.
func TestUnknownKeyFloodFetchesOncePerCooldown(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	clk := newClock()
	c := New(Options{AllowPrivate: true, Now: clk.Now})
	now := clk.Now()
	m := ti.oidcMethod()
	bogus := newTestKey(t, "")
	var wg sync.WaitGroup
	errs := make([]error, 200)
	for i := range errs {
		raw := sign(t, bogus.alg, bogus.priv, "bogus-"+string(rune('a'+i%26))+strings.Repeat("x", i/26), ti.claims(now, nil))
		wg.Go(func() { _, errs[i] = c.VerifyIDToken(t.Context(), m, raw, "n") })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("token %d: err = %v, want ErrUnknownKey", i, err)
		}
	}
	if n := ti.jwksHits.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches, want 1", n)
	}
	if n := c.KeySet(ti.URL() + "/jwks").Fetches(); n != 1 {
		t.Fatalf("Fetches() = %d, want 1", n)
	}
	if _, err := c.VerifyIDToken(t.Context(), m, ti.key().sign(t, ti.claims(now, nil)), "n"); err != nil {
		t.Fatalf("good token: %v", err)
	}
	// Once the cool-down has passed, one more fetch; then cooling down again.
	clk.Advance(DefaultCooldown)
	for range 50 {
		raw := sign(t, bogus.alg, bogus.priv, "bogus", ti.claims(clk.Now(), nil))
		if _, err := c.VerifyIDToken(t.Context(), m, raw, "n"); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("err = %v, want ErrUnknownKey", err)
		}
	}
	if n := ti.jwksHits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches after the cool-down, want 2", n)
	}
}

// A key the provider rotates in is picked up once the cool-down allows, without a restart; a
// known key id with a bad signature never refetches.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	clk := newClock()
	c := New(Options{AllowPrivate: true, Now: clk.Now, Cooldown: 200 * time.Millisecond})
	m := ti.oidcMethod()
	verify := func(raw string) error {
		_, err := c.VerifyIDToken(t.Context(), m, raw, "n")
		return err
	}
	old := ti.key()
	if err := verify(old.sign(t, ti.claims(clk.Now(), nil))); err != nil {
		t.Fatal(err)
	}
	k2 := ti.rotate("k2")
	// The old key id is still held: a token it signed verifies without a fetch.
	if err := verify(old.sign(t, ti.claims(clk.Now(), nil))); err != nil {
		t.Fatal(err)
	}
	raw := k2.sign(t, ti.claims(clk.Now(), nil))
	if err := verify(raw); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("rotated key within the cool-down: err = %v, want ErrUnknownKey", err)
	}
	if n := ti.jwksHits.Load(); n != 1 {
		t.Fatalf("%d JWKS fetches within the cool-down, want 1", n)
	}
	clk.Advance(200 * time.Millisecond)
	if err := verify(raw); err != nil {
		t.Fatalf("rotated key after the cool-down: %v", err)
	}
	if n := ti.jwksHits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2", n)
	}
	// k1 has left the set; a token naming k2 but signed by another key does not refetch.
	clk.Advance(time.Second)
	if err := verify(sign(t, old.alg, old.priv, "k2", ti.claims(clk.Now(), nil))); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("forged: err = %v, want ErrBadSignature", err)
	}
	if err := verify(old.sign(t, ti.claims(clk.Now(), nil))); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("withdrawn key: err = %v, want ErrUnknownKey", err)
	}
	if n := ti.jwksHits.Load(); n != 3 {
		t.Fatalf("%d JWKS fetches, want 3 (none for the bad signature, one for the withdrawn key)", n)
	}
}

// Keys older than KeyMaxAge are fetched again at their next use, so a withdrawn key stops
// verifying even when its id is still held.
func TestKeysExpire(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	clk := newClock()
	c := New(Options{AllowPrivate: true, Now: clk.Now})
	m := ti.oidcMethod()
	old := ti.key()
	if _, err := c.VerifyIDToken(t.Context(), m, old.sign(t, ti.claims(clk.Now(), nil)), "n"); err != nil {
		t.Fatal(err)
	}
	ti.rotate("k1") // same id, new key
	clk.Advance(DefaultKeyMaxAge)
	if _, err := c.VerifyIDToken(t.Context(), m, old.sign(t, ti.claims(clk.Now(), nil)), "n"); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("err = %v, want ErrBadSignature", err)
	}
	if n := ti.jwksHits.Load(); n != 2 {
		t.Fatalf("%d JWKS fetches, want 2", n)
	}
}

func TestPrivateIssuerRefused(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	raw := ti.key().sign(t, ti.claims(time.Now(), nil))
	for name, opts := range map[string]Options{
		"default client":  {},
		"injected client": {HTTPClient: ti.srv.Client()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := New(opts)
			_, err := c.VerifyIDToken(t.Context(), ti.oidcMethod(), raw, "n")
			if !errors.Is(err, webhook.ErrPrivateAddress) || !errors.Is(err, ErrProvider) {
				t.Fatalf("err = %v, want ErrPrivateAddress", err)
			}
			_, err = c.VerifyJWT(t.Context(), Method{Kind: KindJWT, Issuer: ti.URL(), JWKSURL: ti.URL() + "/jwks", Audiences: []string{"client"}}, raw)
			if !errors.Is(err, webhook.ErrPrivateAddress) || !errors.Is(err, ErrKeysUnavailable) {
				t.Fatalf("err = %v, want ErrPrivateAddress", err)
			}
		})
	}
	t.Cleanup(func() {
		if n := ti.discoveryHits.Load() + ti.jwksHits.Load(); n != 0 {
			t.Errorf("the private issuer was reached %d times", n)
		}
	})
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	clk := newClock()
	d := NewDiscovery(Options{AllowPrivate: true, Now: clk.Now})
	ctx := context.Background()
	p, err := d.Provider(ctx, ti.URL())
	if err != nil {
		t.Fatal(err)
	}
	if p.DeviceAuthorizationEndpoint != ti.URL()+"/device" || p.JWKSURI != ti.URL()+"/jwks" ||
		p.TokenEndpoint != ti.URL()+"/token" || p.UserinfoEndpoint != ti.URL()+"/userinfo" ||
		p.AuthorizationEndpoint != ti.URL()+"/authorize" {
		t.Fatalf("provider = %+v", p)
	}
	if _, err := d.Provider(ctx, ti.URL()); err != nil {
		t.Fatal(err)
	}
	if n := ti.discoveryHits.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1 (cached)", n)
	}
	clk.Advance(DefaultDiscoveryTTL)
	if _, err := d.Provider(ctx, ti.URL()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Refresh(ctx, ti.URL()); err != nil {
		t.Fatal(err)
	}
	if n := ti.discoveryHits.Load(); n != 3 {
		t.Fatalf("%d fetches, want 3 (after the TTL, and refreshed)", n)
	}

	ti.mu.Lock()
	ti.issuerClaim = "https://evil.example"
	ti.mu.Unlock()
	if _, err := d.Refresh(ctx, ti.URL()); !errors.Is(err, ErrProvider) {
		t.Fatalf("issuer mismatch: err = %v, want ErrProvider", err)
	}
}

func TestDiscoveryIsBounded(t *testing.T) {
	t.Parallel()
	issuers := []*testIssuer{newTestIssuer(t), newTestIssuer(t), newTestIssuer(t)}
	clk := newClock()
	d := NewDiscovery(Options{AllowPrivate: true, Now: clk.Now, MaxIssuers: 2})
	for _, ti := range issuers {
		clk.Advance(time.Second)
		if _, err := d.Provider(t.Context(), ti.URL()); err != nil {
			t.Fatal(err)
		}
	}
	d.mu.Lock()
	n := len(d.entries)
	_, first := d.entries[issuers[0].URL()]
	d.mu.Unlock()
	if n != 2 || first {
		t.Fatalf("%d entries (first kept: %v), want 2 without the least recently used", n, first)
	}
}

func TestAnswersAreBounded(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	ti.mu.Lock()
	ti.userinfo = func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"sub":"` + strings.Repeat("x", MaxResponseBytes) + `"}`))
	}
	ti.mu.Unlock()
	c := New(Options{AllowPrivate: true})
	p, err := c.Discovery().Provider(t.Context(), ti.URL())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UserInfo(t.Context(), p, "at"); !errors.Is(err, errTooLarge) {
		t.Fatalf("err = %v, want errTooLarge", err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	c := New(Options{AllowPrivate: true})
	for _, m := range []Method{
		ti.oidcMethod(),
		{Kind: KindJWT, Issuer: ti.URL(), JWKSURL: ti.URL() + "/jwks"},
	} {
		if err := c.Check(t.Context(), m); err != nil {
			t.Fatalf("Check(%+v): %v", m, err)
		}
	}
	if err := c.Check(t.Context(), Method{Kind: KindJWT, Issuer: ti.URL(), JWKSURL: ti.URL() + "/nope"}); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("missing keys: err = %v, want ErrKeysUnavailable", err)
	}
	// A JWT method saved without an issuer (before issue 31) signs nobody in: doctor says so.
	if err := c.Check(t.Context(), Method{Kind: KindJWT, JWKSURL: ti.URL() + "/jwks"}); !errors.Is(err, ErrMethod) {
		t.Fatalf("no issuer: err = %v, want ErrMethod", err)
	}
	if err := New(Options{}).Check(t.Context(), ti.oidcMethod()); !errors.Is(err, webhook.ErrPrivateAddress) {
		t.Fatalf("private issuer: err = %v, want ErrPrivateAddress", err)
	}
}
