package sso

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPKCE(t *testing.T) {
	t.Parallel()
	// RFC 7636, appendix B.
	if got := PKCEChallenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"); got != "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" {
		t.Fatalf("challenge = %q", got)
	}
	v, c := NewPKCE()
	if len(v) < 43 || PKCEChallenge(v) != c {
		t.Fatalf("NewPKCE = %q, %q", v, c)
	}
	seen := map[string]bool{}
	for _, s := range []string{NewState(), NewState(), NewNonce(), NewNonce(), v} {
		if len(s) < 43 || seen[s] || strings.ContainsAny(s, "+/=") {
			t.Fatalf("random value %q: short, repeated or not base64url", s)
		}
		seen[s] = true
	}
}

func TestAuthorizationURL(t *testing.T) {
	t.Parallel()
	p := &Provider{AuthorizationEndpoint: "https://idp.example/authorize?tenant=x"}
	u, err := url.Parse(AuthorizationURL(p, "client", "http://127.0.0.1:4242/callback", []string{"groups", "email"}, "st", "no", "ch"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	want := map[string]string{
		"tenant": "x", "response_type": "code", "client_id": "client", "redirect_uri": "http://127.0.0.1:4242/callback",
		"scope": "openid groups email", "state": "st", "nonce": "no", "code_challenge": "ch", "code_challenge_method": "S256",
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	if got := Scopes(nil); !slices.Equal(got, []string{"openid", "profile", "email"}) {
		t.Errorf("default scopes = %q", got)
	}
}

// codeServer makes ti's token endpoint redeem one code once, checking the PKCE verifier and the
// client's authentication (basic or post).
func codeServer(t *testing.T, ti *testIssuer, code, challenge, secret string, basic bool, idToken string) {
	t.Helper()
	var mu sync.Mutex
	used := false
	ti.mu.Lock()
	defer ti.mu.Unlock()
	ti.token = func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			t.Error(err)
		}
		id, sec, ok := r.BasicAuth()
		if !basic {
			id, sec, ok = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), !ok
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case !ok || id != "client" || sec != secret:
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]string{"error": "invalid_client"})
		case used || r.PostForm.Get("code") != code || PKCEChallenge(r.PostForm.Get("code_verifier")) != challenge ||
			r.PostForm.Get("grant_type") != "authorization_code":
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_grant"})
		default:
			used = true
			writeJSON(w, map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 60, "id_token": idToken})
		}
	}
}

func TestExchange(t *testing.T) {
	t.Parallel()
	for name, basic := range map[string]bool{"basic": true, "post": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ti := newTestIssuer(t)
			if !basic {
				ti.authMethods = []string{"client_secret_post"}
			}
			c := New(Options{AllowPrivate: true})
			verifier, challenge := NewPKCE()
			idToken := ti.key().sign(t, ti.claims(time.Now(), nil))
			codeServer(t, ti, "code-1", challenge, "secret", basic, idToken)
			p, err := c.Discovery().Provider(t.Context(), ti.URL())
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Exchange(t.Context(), p, "client", "secret", "http://127.0.0.1/cb", "code-1", "wrong-verifier-"+verifier); !errors.Is(err, ErrRefused) {
				t.Fatalf("wrong verifier: err = %v, want ErrRefused", err)
			}
			got, at, err := c.Exchange(t.Context(), p, "client", "secret", "http://127.0.0.1/cb", "code-1", verifier)
			if err != nil || got != idToken || at != "at" {
				t.Fatalf("Exchange = %q, %q, %v", got, at, err)
			}
			if _, _, err := c.Exchange(t.Context(), p, "client", "secret", "http://127.0.0.1/cb", "code-1", verifier); !errors.Is(err, ErrRefused) {
				t.Fatalf("replayed code: err = %v, want ErrRefused", err)
			}
			if _, err := c.VerifyIDToken(t.Context(), ti.oidcMethod(), got, "n"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestUserInfo(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	ti.mu.Lock()
	ti.userinfo = func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer at" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		writeJSON(w, map[string]any{"sub": "user-1", "groups": []string{"dev"}, "email": "u@example.com"})
	}
	ti.mu.Unlock()
	c := New(Options{AllowPrivate: true})
	p, err := c.Discovery().Provider(t.Context(), ti.URL())
	if err != nil {
		t.Fatal(err)
	}
	ui, err := c.UserInfo(t.Context(), p, "at")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := MergeUserInfo(Claims{"sub": "user-1", "email": "id@example.com"}, ui)
	if err != nil || merged.String("email") != "id@example.com" || !slices.Equal(merged.Strings("groups"), []string{"dev"}) {
		t.Fatalf("MergeUserInfo = %v, %v", merged, err)
	}
	if _, err := MergeUserInfo(Claims{"sub": "other"}, ui); !errors.Is(err, ErrProvider) {
		t.Fatalf("other subject: err = %v", err)
	}
	if _, err := c.UserInfo(t.Context(), p, "bad"); !errors.Is(err, ErrProvider) {
		t.Fatalf("bad token: err = %v", err)
	}
}

func TestDeviceFlow(t *testing.T) {
	t.Parallel()
	ti := newTestIssuer(t)
	idToken := ti.key().sign(t, ti.claims(time.Now(), map[string]any{"nonce": nil}))
	answers := []string{"authorization_pending", "slow_down", "", "access_denied", "expired_token", "invalid_grant"}
	var mu sync.Mutex
	ti.mu.Lock()
	ti.device = func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("client_id") != "client" || r.PostForm.Get("scope") != "openid profile email" {
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_request"})
			return
		}
		writeJSON(w, map[string]any{"device_code": "dc", "user_code": "ABCD-EFGH", "verification_uri": ti.URL() + "/activate", "expires_in": 600, "interval": 5})
	}
	ti.token = func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, sec, _ := r.BasicAuth()
		if id != "client" || sec != "secret" || r.PostForm.Get("grant_type") != deviceGrant || r.PostForm.Get("device_code") != "dc" {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]string{"error": "invalid_client"})
			return
		}
		mu.Lock()
		a := answers[0]
		answers = answers[1:]
		mu.Unlock()
		if a == "" {
			writeJSON(w, map[string]any{"access_token": "at", "token_type": "Bearer", "id_token": idToken})
			return
		}
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]string{"error": a})
	}
	ti.mu.Unlock()
	c := New(Options{AllowPrivate: true})
	p, err := c.Discovery().Provider(t.Context(), ti.URL())
	if err != nil {
		t.Fatal(err)
	}
	da, err := c.StartDevice(t.Context(), p, "client", "secret", nil)
	if err != nil || da.DeviceCode != "dc" || da.UserCode != "ABCD-EFGH" || da.Interval != 5 {
		t.Fatalf("StartDevice = %+v, %v", da, err)
	}
	for _, want := range []DeviceStatus{DevicePending, DeviceSlowDown, DeviceApproved, DeviceDenied, DeviceExpired} {
		start := time.Now()
		got, err := c.PollDevice(t.Context(), p, "client", "secret", "dc")
		if err != nil || got.Status != want {
			t.Fatalf("PollDevice = %+v, %v; want status %d", got, err, want)
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("PollDevice blocked for %s", time.Since(start))
		}
		if want == DeviceApproved {
			if got.IDToken != idToken || got.AccessToken != "at" {
				t.Fatalf("tokens = %+v", got)
			}
			if _, err := c.VerifyIDToken(t.Context(), ti.oidcMethod(), got.IDToken, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := c.PollDevice(t.Context(), p, "client", "secret", "dc"); !errors.Is(err, ErrRefused) {
		t.Fatalf("invalid_grant: err = %v, want ErrRefused", err)
	}
	if _, err := c.StartDevice(t.Context(), &Provider{Issuer: "x"}, "client", "", nil); !errors.Is(err, ErrNotSupported) {
		t.Fatalf("no device endpoint: err = %v, want ErrNotSupported", err)
	}
}
