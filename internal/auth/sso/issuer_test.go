package sso

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testKey is a signing key of the test issuer.
type testKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func newTestKey(t *testing.T, kid string) *testKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &testKey{kid: kid, alg: jose.ES256, priv: priv}
}

// testIssuer is an OpenID provider in an httptest.Server: discovery, JWKS (counted), and the
// token, userinfo and device endpoints that tests fill in.
type testIssuer struct {
	t   *testing.T
	srv *httptest.Server

	discoveryHits atomic.Int64
	jwksHits      atomic.Int64

	mu          sync.Mutex
	keys        []*testKey
	issuerClaim string // the issuer the discovery document names; the server's URL when empty
	authMethods []string
	token       http.HandlerFunc
	userinfo    http.HandlerFunc
	device      http.HandlerFunc
}

func newTestIssuer(t *testing.T) *testIssuer {
	t.Helper()
	ti := &testIssuer{t: t, keys: []*testKey{newTestKey(t, "k1")}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+DiscoveryPath, func(w http.ResponseWriter, _ *http.Request) {
		ti.discoveryHits.Add(1)
		ti.mu.Lock()
		iss := ti.issuerClaim
		methods := ti.authMethods
		ti.mu.Unlock()
		if iss == "" {
			iss = ti.URL()
		}
		writeJSON(w, map[string]any{
			"issuer":                                iss,
			"authorization_endpoint":                ti.URL() + "/authorize",
			"token_endpoint":                        ti.URL() + "/token",
			"userinfo_endpoint":                     ti.URL() + "/userinfo",
			"device_authorization_endpoint":         ti.URL() + "/device",
			"jwks_uri":                              ti.URL() + "/jwks",
			"token_endpoint_auth_methods_supported": methods,
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		ti.jwksHits.Add(1)
		ti.mu.Lock()
		var set jose.JSONWebKeySet
		for _, k := range ti.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"})
		}
		ti.mu.Unlock()
		writeJSON(w, set)
	})
	for _, path := range []string{"/token", "/userinfo", "/device"} {
		mux.HandleFunc("POST "+path, ti.endpoint(path))
		mux.HandleFunc("GET "+path, ti.endpoint(path))
	}
	ti.srv = httptest.NewServer(mux)
	t.Cleanup(ti.srv.Close)
	return ti
}

func (ti *testIssuer) endpoint(path string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ti.mu.Lock()
		h := map[string]http.HandlerFunc{"/token": ti.token, "/userinfo": ti.userinfo, "/device": ti.device}[path]
		ti.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (ti *testIssuer) URL() string { return ti.srv.URL }

func (ti *testIssuer) key() *testKey {
	ti.mu.Lock()
	defer ti.mu.Unlock()
	return ti.keys[0]
}

// rotate replaces the issuer's keys with a new one.
func (ti *testIssuer) rotate(kid string) *testKey {
	k := newTestKey(ti.t, kid)
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.keys = []*testKey{k}
	return k
}

// claims are an ID token's claims for client "client" with nonce "n", valid at now, with
// overrides (a nil value deletes the claim).
func (ti *testIssuer) claims(now time.Time, overrides map[string]any) map[string]any {
	c := map[string]any{
		"iss":   ti.URL(),
		"sub":   "user-1",
		"aud":   "client",
		"exp":   now.Add(5 * time.Minute).Unix(),
		"iat":   now.Unix(),
		"nonce": "n",
	}
	for k, v := range overrides {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	return c
}

// sign signs claims with key as a compact JWT.
func sign(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(maps.Clone(claims)).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// signWith signs claims with k.
func (k *testKey) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	return sign(t, k.alg, k.priv, k.kid, claims)
}

// oidcMethod is an OIDC method for the issuer with client "client".
func (ti *testIssuer) oidcMethod() Method {
	return Method{Kind: KindOIDC, Issuer: ti.URL(), ClientID: "client"}
}
