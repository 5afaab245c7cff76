package authmethods_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/ratelimit"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/internal/authmethods"
	"github.com/better-compute/better-compute/server/servertest"
)

// fakeIssuer is an OpenID provider's discovery document on loopback, its fetches counted; down
// makes it answer 503.
type fakeIssuer struct {
	srv  *httptest.Server
	hits atomic.Int64
	down atomic.Bool
}

func newFakeIssuer(t *testing.T) *fakeIssuer {
	t.Helper()
	f := &fakeIssuer{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		if f.down.Load() || r.URL.Path != "/.well-known/openid-configuration" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		u := f.srv.URL
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{
			"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token", "jwks_uri": u + "/keys",
		})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// loginEnv is the API, trusting X-Forwarded-For from loopback so that tests can name client
// addresses, with an OIDC method "okta" of the root tenant at issuer whose redirect URIs hold
// the API's callback.
func loginEnv(t *testing.T, issuer string, configure func(*server.Options)) *servertest.Env {
	t.Helper()
	env := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) {
		o.Auth.AllowPrivateIssuers = true
		o.RateLimits.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		if configure != nil {
			configure(o)
		}
	})
	m := oidc("okta")
	m.Issuer = issuer
	m.RedirectUris = append(m.RedirectUris, env.URL+authmethods.CallbackPath)
	if _, err := client(env, env.AdminKey).CreateAuthMethod(t.Context(), &authv1.CreateAuthMethodRequest{AuthMethod: m}); err != nil {
		t.Fatal(err)
	}
	return env
}

// loginRequest is the dashboard's sign-in start from client (an address the API reads from
// X-Forwarded-For), with extra headers; a header set to "" is left out.
func loginRequest(t *testing.T, env *servertest.Env, method, clientAddr string, extra map[string]string) *http.Request {
	t.Helper()
	form := url.Values{"tenant": {"root"}, "method": {"okta"}, "return": {"/dashboard/#/nodes"}}
	req, err := http.NewRequestWithContext(t.Context(), method, env.URL+authmethods.LoginPath, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{
		"Content-Type": "application/x-www-form-urlencoded", "X-Better-Compute": "1",
		"Sec-Fetch-Site": "same-origin", "X-Forwarded-For": clientAddr,
	}
	for k, v := range extra {
		h[k] = v
	}
	for k, v := range h {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	return req
}

// answer is what the API answered, its body read.
type answer struct {
	status     int
	retryAfter string
	cookies    []*http.Cookie
	body       string
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return answer{res.StatusCode, res.Header.Get("Retry-After"), res.Cookies(), string(body)}
}

func countFlows(t *testing.T, env *servertest.Env) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(t.Context(), "SELECT count(*) FROM auth_flows").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLoginFloodFromOneAddress: anonymous sign-in starts from one address stop at
// auth.flows.perAddress and then at the address's token bucket, each refusal a 429 with
// Retry-After; a sign-in from another address still starts, through the dashboard's route and
// auth/startLogin alike.
func TestLoginFloodFromOneAddress(t *testing.T) {
	t.Parallel()
	op := newFakeIssuer(t)
	env := loginEnv(t, op.srv.URL, func(o *server.Options) {
		o.Auth.Flows = server.FlowLimits{PerAddress: 5, PerMethod: 1000}
		o.RateLimits.PerAddress = ratelimit.Limit{Rate: 0.01, Burst: 30}
	})
	var started, capped, bucket int
	for range 60 {
		a := do(t, loginRequest(t, env, http.MethodPost, "192.0.2.1", nil))
		switch {
		case a.status == http.StatusOK:
			started++
		case a.status == http.StatusTooManyRequests && strings.Contains(a.body, "auth.flows.perAddress"):
			capped++
		case a.status == http.StatusTooManyRequests && strings.Contains(a.body, "rateLimits.perAddress"):
			bucket++
		default:
			t.Fatalf("start: %d %s", a.status, a.body)
		}
		if a.status == http.StatusTooManyRequests {
			if s, err := strconv.Atoi(a.retryAfter); err != nil || s < 1 {
				t.Fatalf("429 with Retry-After %q, want whole seconds", a.retryAfter)
			}
		}
	}
	// The bucket holds 30 (the last few may refill): 5 flows, the rest refused by the flow cap
	// until the bucket is empty.
	if started != 5 || capped < 24 || bucket < 25 {
		t.Fatalf("60 starts from one address: %d started, %d over the flow cap, %d over the bucket; want 5, 25, 30", started, capped, bucket)
	}
	if a := do(t, loginRequest(t, env, http.MethodPost, "192.0.2.2", nil)); a.status != http.StatusOK {
		t.Fatalf("a start from another address: %d %s", a.status, a.body)
	}
	// auth/startLogin (public) counts against the same caps, by the same address.
	hc := &http.Client{Transport: forwardedFor{"192.0.2.3", http.DefaultTransport}}
	anon := authv1connect.NewAuthServiceClient(hc, env.URL)
	start := &authv1.StartLoginRequest{Tenant: "root", Method: "okta", RedirectUri: "http://127.0.0.1:4242/callback"}
	for range 5 {
		if _, err := anon.StartLogin(t.Context(), start); err != nil {
			t.Fatal(err)
		}
	}
	_, err := anon.StartLogin(t.Context(), start)
	wantCode(t, err, connect.CodeResourceExhausted)
	if ce, ok := errors.AsType[*connect.Error](err); !ok || ce.Meta().Get("Retry-After") == "" || !strings.Contains(ce.Message(), "auth.flows.perAddress") {
		t.Fatalf("refusal %v, want Retry-After and the cap's key", err)
	}
	if n := countFlows(t, env); n != 11 {
		t.Fatalf("%d flows recorded, want 11", n)
	}
}

// forwardedFor names the client address to an API that trusts loopback proxies.
type forwardedFor struct {
	addr string
	next http.RoundTripper
}

func (f forwardedFor) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", f.addr)
	return f.next.RoundTrip(r)
}

// TestLoginCapIsExact: concurrent starts from many addresses never record more flows than
// auth.flows.perMethod, and every refusal is a 429 naming it.
func TestLoginCapIsExact(t *testing.T) {
	t.Parallel()
	op := newFakeIssuer(t)
	const most = 20
	env := loginEnv(t, op.srv.URL, func(o *server.Options) {
		o.Auth.Flows = server.FlowLimits{PerMethod: most}
	})
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := range 120 {
		wg.Go(func() {
			a := do(t, loginRequest(t, env, http.MethodPost, fmt.Sprintf("198.51.100.%d", i+1), nil))
			switch {
			case a.status == http.StatusOK:
				ok.Add(1)
			case a.status == http.StatusTooManyRequests && a.retryAfter != "" && strings.Contains(a.body, "auth.flows.perMethod"):
				refused.Add(1)
			default:
				t.Errorf("start: %d %s", a.status, a.body)
			}
		})
	}
	wg.Wait()
	if ok.Load() != most || refused.Load() != 120-most {
		t.Fatalf("%d started, %d refused; want %d and %d", ok.Load(), refused.Load(), most, 120-most)
	}
	if n := countFlows(t, env); n != most {
		t.Fatalf("%d flows recorded, want exactly %d", n, most)
	}
}

// TestLoginNeedsTheDashboard: a top-level GET (a link or a navigation another site makes), a
// POST without the X-Better-Compute header, and a cross-site POST start no sign-in: no flow, no
// login cookie. The dashboard's own POST does.
func TestLoginNeedsTheDashboard(t *testing.T) {
	t.Parallel()
	op := newFakeIssuer(t)
	env := loginEnv(t, op.srv.URL, nil)
	for name, req := range map[string]*http.Request{
		"top-level GET":     loginRequest(t, env, http.MethodGet, "192.0.2.1", map[string]string{"X-Better-Compute": "", "Sec-Fetch-Site": "cross-site"}),
		"GET with a query":  must(http.NewRequestWithContext(t.Context(), http.MethodGet, env.URL+"/auth/login?tenant=root&method=okta", nil)),
		"POST, no header":   loginRequest(t, env, http.MethodPost, "192.0.2.1", map[string]string{"X-Better-Compute": ""}),
		"cross-site POST":   loginRequest(t, env, http.MethodPost, "192.0.2.1", map[string]string{"Sec-Fetch-Site": "cross-site"}),
		"other origin POST": loginRequest(t, env, http.MethodPost, "192.0.2.1", map[string]string{"Sec-Fetch-Site": "", "Origin": "https://evil.example"}),
	} {
		a := do(t, req)
		if a.status == http.StatusOK || a.status == http.StatusFound || len(a.cookies) != 0 {
			t.Errorf("%s: %d %v %s, want a refusal setting no cookie", name, a.status, a.cookies, a.body)
		}
	}
	if n := countFlows(t, env); n != 0 {
		t.Fatalf("%d flows recorded by refused starts", n)
	}
	a := do(t, loginRequest(t, env, http.MethodPost, "192.0.2.1", nil))
	var start struct {
		AuthorizationURL string `json:"authorizationUrl"`
	}
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &start) != nil || !strings.HasPrefix(start.AuthorizationURL, op.srv.URL+"/authorize?") {
		t.Fatalf("the dashboard's start: %d %s", a.status, a.body)
	}
	if len(a.cookies) != 1 || a.cookies[0].Name != "bc_login" || !a.cookies[0].HttpOnly {
		t.Fatalf("cookies %v, want the HttpOnly login cookie", a.cookies)
	}
	u, _ := url.Parse(start.AuthorizationURL)
	if u.Query().Get("state") != a.cookies[0].Value {
		t.Fatal("the login cookie does not hold the flow's state")
	}
}

func must(r *http.Request, err error) *http.Request {
	if err != nil {
		panic(err)
	}
	return r
}

// TestSignInKeepsALiveSession: a browser that holds a live session is not signed in again,
// neither at the start nor at the callback (a sign-in another page started would replace it);
// a cookie of an ended session is no obstacle.
func TestSignInKeepsALiveSession(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	op := newFakeIssuer(t)
	env := loginEnv(t, op.srv.URL, nil)
	me, err := env.IAM(env.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := auth.StartSession(ctx, env.Pool, auth.SessionLifetimes{}, auth.SessionParams{
		TenantID: uuid.MustParse(me.GetTenant().GetId()), PrincipalID: uuid.MustParse(me.GetPrincipal().GetId()), Kind: auth.SessionBrowser,
	})
	if err != nil {
		t.Fatal(err)
	}
	live := &http.Cookie{Name: auth.SessionCookie, Value: sess.Token}

	// A start (from a page that got past the other checks) is refused while the session lives.
	req := loginRequest(t, env, http.MethodPost, "192.0.2.1", nil)
	req.AddCookie(live)
	if a := do(t, req); a.status != http.StatusBadRequest || !strings.Contains(a.body, "already signed in") || len(a.cookies) != 0 {
		t.Fatalf("start with a live session: %d %v %s", a.status, a.cookies, a.body)
	}
	// A callback carrying a flow's state and login cookie does not replace the session either.
	a := do(t, loginRequest(t, env, http.MethodPost, "192.0.2.1", nil))
	if a.status != http.StatusOK {
		t.Fatalf("start: %d %s", a.status, a.body)
	}
	state := a.cookies[0].Value
	cb, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+authmethods.CallbackPath+"?code=c&state="+url.QueryEscape(state), nil)
	if err != nil {
		t.Fatal(err)
	}
	cb.AddCookie(&http.Cookie{Name: "bc_login", Value: state})
	cb.AddCookie(live)
	a = do(t, cb)
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "already signed in") {
		t.Fatalf("callback with a live session: %d %s", a.status, a.body)
	}
	for _, c := range a.cookies {
		if c.Name == auth.SessionCookie {
			t.Fatalf("the callback set the session cookie %v", c)
		}
	}
	// An ended session's cookie does not stop a sign-in.
	req = loginRequest(t, env, http.MethodPost, "192.0.2.1", nil)
	req.AddCookie(&http.Cookie{Name: auth.SessionCookie, Value: "bcs_ended"})
	if a := do(t, req); a.status != http.StatusOK {
		t.Fatalf("start with an ended session's cookie: %d %s", a.status, a.body)
	}
}

// TestLoginAgainstFailingDiscovery: 1,000 sign-in starts against an issuer whose discovery fails
// fetch its document a handful of times, not once a start.
func TestLoginAgainstFailingDiscovery(t *testing.T) {
	t.Parallel()
	op := newFakeIssuer(t)
	op.down.Store(true)
	env := loginEnv(t, op.srv.URL, func(o *server.Options) { o.RateLimits.PerAddress = ratelimit.Limit{} })
	before := op.hits.Load()
	anon := authv1connect.NewAuthServiceClient(http.DefaultClient, env.URL)
	start := &authv1.StartLoginRequest{Tenant: "root", Method: "okta", RedirectUri: "http://127.0.0.1:4242/callback"}
	var wg sync.WaitGroup
	next := make(chan struct{})
	go func() {
		defer close(next)
		for range 1000 {
			next <- struct{}{}
		}
	}()
	for range 20 {
		wg.Go(func() {
			for range next {
				_, err := anon.StartLogin(t.Context(), start)
				if connect.CodeOf(err) != connect.CodeUnavailable {
					t.Errorf("start: %v, want unavailable", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := op.hits.Load() - before; n > 3 {
		t.Fatalf("1,000 starts fetched the failing discovery document %d times, want at most 3", n)
	}
}
