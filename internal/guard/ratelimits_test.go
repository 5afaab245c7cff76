package guard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/ratelimit"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// answer is what one raw JSON call over HTTP came back with.
type answer struct {
	status     int
	code       string
	retryAfter string
}

// post calls the short route path (like "/system/info") with a JSON body; headers are set as
// given, none added.
func post(t *testing.T, env *servertest.Env, path string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, env.URL+path, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := env.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	a := answer{status: res.StatusCode, code: "ok", retryAfter: res.Header.Get(guard.RetryAfterHeader)}
	if res.StatusCode != http.StatusOK {
		var e struct{ Code string }
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("POST %s: %s %s", path, res.Status, body)
		}
		a.code = e.Code
	}
	return a
}

// metric reads one series of the server's /metrics, 0 when absent.
func metric(t *testing.T, env *servertest.Env, series string) float64 {
	t.Helper()
	res, err := http.Get(env.Server.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return 0
}

func auditRows(t *testing.T, env *servertest.Env, where string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM audit_events WHERE "+where, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAddressBucketRefusesBurstWithRetryAfter: calls from one address beyond the bucket's burst
// are refused with resource_exhausted (HTTP 429) and Retry-After, before authentication, so a
// flood with any credential never reaches the database and leaves no audit row.
func TestAddressBucketRefusesBurstWithRetryAfter(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) {
		o.RateLimits = guard.RateLimits{PerAddress: ratelimit.Limit{Rate: 0.5, Burst: 3}}
	})
	for i := range 3 {
		if a := post(t, env, "/system/info", nil); a.code != "ok" {
			t.Fatalf("call %d of the burst: %+v", i+1, a)
		}
	}
	a := post(t, env, "/system/info", nil)
	if a.status != http.StatusTooManyRequests || a.code != "resource_exhausted" || a.retryAfter != "2" {
		t.Fatalf("call over the burst: %+v, want 429 resource_exhausted with Retry-After 2", a)
	}
	// A bad key to an audited method is refused by the bucket, not by authentication.
	before := auditRows(t, env, "true")
	a = post(t, env, "/iam/createPrincipal", http.Header{"X-Better-Compute": {"1"}, "Authorization": {"Bearer bck_nope_nope"}})
	if a.code != "resource_exhausted" || a.retryAfter == "" {
		t.Fatalf("bad key over the burst: %+v, want resource_exhausted with Retry-After", a)
	}
	if n := auditRows(t, env, "true"); n != before {
		t.Errorf("%d audit rows added by refused anonymous calls", n-before)
	}
	if n := metric(t, env, `bc_api_rate_limited_total{bucket="address"}`); n != 2 {
		t.Errorf(`bc_api_rate_limited_total{bucket="address"} = %v, want 2`, n)
	}
}

// TestForwardedForCountsOnlyFromTrustedProxies: X-Forwarded-For picks the bucket only when the
// connection comes from a trusted proxy; otherwise a client cannot dodge its bucket by sending
// one.
func TestForwardedForCountsOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	limit := ratelimit.Limit{Rate: 0.001, Burst: 1}
	from := func(addr string) http.Header { return http.Header{"X-Forwarded-For": {addr}} }

	behind := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) {
		o.RateLimits = guard.RateLimits{PerAddress: limit, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	})
	if a := post(t, behind, "/system/info", from("198.51.100.1")); a.code != "ok" {
		t.Fatalf("first call of a client: %+v", a)
	}
	if a := post(t, behind, "/system/info", from("198.51.100.1")); a.code != "resource_exhausted" {
		t.Fatalf("second call of the same client: %+v, want resource_exhausted", a)
	}
	if a := post(t, behind, "/system/info", from("198.51.100.2")); a.code != "ok" {
		t.Fatalf("first call of another client behind the proxy: %+v", a)
	}

	direct := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) { o.RateLimits = guard.RateLimits{PerAddress: limit} })
	if a := post(t, direct, "/system/info", from("198.51.100.1")); a.code != "ok" {
		t.Fatalf("first call: %+v", a)
	}
	if a := post(t, direct, "/system/info", from("198.51.100.2")); a.code != "resource_exhausted" {
		t.Fatalf("a forged X-Forwarded-For from an untrusted peer got a fresh bucket: %+v", a)
	}
}

// TestAnonymousRefusalsAreCountedNotAudited: anonymous calls to an audited method, refused for
// no key, a bad key or no CSRF header, add no audit row; the metric counts each one.
func TestAnonymousRefusalsAreCountedNotAudited(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	before := auditRows(t, env, "true")
	const rounds = 100
	for i := range rounds {
		h := http.Header{"X-Better-Compute": {"1"}}
		want := "unauthenticated"
		switch i % 3 {
		case 1:
			h.Set("Authorization", "Bearer bck_"+uuid.NewString()+"_x")
		case 2:
			h = http.Header{"Authorization": {"Bearer " + env.AdminKey}} // no CSRF header: refused before authentication
			want = "invalid_argument"
		}
		if a := post(t, env, "/iam/createPrincipal", h); a.code != want {
			t.Fatalf("call %d: %+v, want %s", i, a, want)
		}
	}
	if n := auditRows(t, env, "true"); n != before {
		t.Errorf("%d anonymous refusals added %d audit rows, want none", rounds, n-before)
	}
	unauth := metric(t, env, `bc_api_anonymous_refusals_total{code="unauthenticated"}`)
	invalid := metric(t, env, `bc_api_anonymous_refusals_total{code="invalid_argument"}`)
	if unauth+invalid != rounds || invalid != rounds/3 {
		t.Errorf("bc_api_anonymous_refusals_total: unauthenticated %v, invalid_argument %v; want %d in all, %d invalid_argument",
			unauth, invalid, rounds, rounds/3)
	}
}

// TestAuthenticatedRefusalsAreAudited: a principal's calls refused for permission, and then by
// its key's bucket (resource_exhausted with Retry-After), are each audited with its tenant.
func TestAuthenticatedRefusalsAreAudited(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) {
		o.RateLimits = guard.RateLimits{PerKey: ratelimit.Limit{Rate: 0.01, Burst: 3}}
	})
	admin := env.IAM(env.AdminKey)
	pr, err := admin.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{
		Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: "no-roles",
	})
	if err != nil {
		t.Fatal(err)
	}
	key, err := admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: pr.GetPrincipal().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"X-Better-Compute": {"1"}, "Authorization": {"Bearer " + key.GetKey()}}
	for i := range 3 {
		if a := post(t, env, "/iam/createPrincipal", h); a.code != "permission_denied" {
			t.Fatalf("call %d: %+v, want permission_denied", i+1, a)
		}
	}
	a := post(t, env, "/iam/createPrincipal", h)
	if a.status != http.StatusTooManyRequests || a.code != "resource_exhausted" || a.retryAfter != "100" {
		t.Fatalf("call over the key's burst: %+v, want 429 resource_exhausted with Retry-After 100", a)
	}
	principal := pr.GetPrincipal().GetId()
	tenant := pr.GetPrincipal().GetTenantId()
	if n := auditRows(t, env, "principal_id = $1 AND tenant_id = $2 AND method = 'iam/createPrincipal' AND outcome = 'permission_denied'", principal, tenant); n != 3 {
		t.Errorf("%d permission_denied audit rows, want 3", n)
	}
	if n := auditRows(t, env, "principal_id = $1 AND tenant_id = $2 AND method = 'iam/createPrincipal' AND outcome = 'resource_exhausted'", principal, tenant); n != 1 {
		t.Errorf("%d resource_exhausted audit rows, want 1", n)
	}
	if n := metric(t, env, `bc_api_rate_limited_total{bucket="key"}`); n != 1 {
		t.Errorf(`bc_api_rate_limited_total{bucket="key"} = %v, want 1`, n)
	}
}
