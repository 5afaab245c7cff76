package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/better-compute/better-compute/client"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1/iamv1connect"
)

// flaky answers Unavailable to the first failures calls of each procedure, and records the
// headers of every call.
type flaky struct {
	iamv1connect.UnimplementedIamServiceHandler
	failures int
	mu       sync.Mutex
	calls    map[string][]http.Header
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls[r.URL.Path] = append(f.calls[r.URL.Path], r.Header.Clone())
	n, failures := len(f.calls[r.URL.Path]), f.failures
	f.mu.Unlock()
	if n <= failures {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"code":"unavailable","message":"try again"}`)
		return
	}
	_, h := iamv1connect.NewIamServiceHandler(f)
	h.ServeHTTP(w, r)
}

func (f *flaky) headers(procedure string) []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[procedure]
}

func (f *flaky) WhoAmI(context.Context, *iamv1.WhoAmIRequest) (*iamv1.WhoAmIResponse, error) {
	return &iamv1.WhoAmIResponse{ApiKeyId: "k"}, nil
}

func (f *flaky) CreatePrincipal(context.Context, *iamv1.CreatePrincipalRequest) (*iamv1.CreatePrincipalResponse, error) {
	return &iamv1.CreatePrincipalResponse{Principal: &iamv1.Principal{Id: "p"}}, nil
}

func (f *flaky) DeletePrincipal(context.Context, *iamv1.DeletePrincipalRequest) (*iamv1.DeletePrincipalResponse, error) {
	return &iamv1.DeletePrincipalResponse{}, nil
}

func TestRetriesOnlyIdempotentMethods(t *testing.T) {
	t.Parallel()
	f := &flaky{failures: 2, calls: map[string][]http.Header{}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	ctx := t.Context()
	c := client.New(srv.URL, client.WithAPIKey("bck_test"),
		client.WithRetry(client.RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Millisecond}))

	if _, err := c.IAM.WhoAmI(ctx, &iamv1.WhoAmIRequest{}); err != nil {
		t.Errorf("whoAmI (no side effects) after 2 failures: %v", err)
	}
	if _, err := c.IAM.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Name: "x"}); err != nil {
		t.Errorf("createPrincipal (idempotent) after 2 failures: %v", err)
	}
	if _, err := c.IAM.DeletePrincipal(ctx, &iamv1.DeletePrincipalRequest{Id: "p"}); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Errorf("deletePrincipal (not idempotent): %v, want the first unavailable error", err)
	}

	who := f.headers(iamv1connect.IamServiceWhoAmIProcedure)
	create := f.headers(iamv1connect.IamServiceCreatePrincipalProcedure)
	del := f.headers(iamv1connect.IamServiceDeletePrincipalProcedure)
	if len(who) != 3 || len(create) != 3 || len(del) != 1 {
		t.Fatalf("attempts: whoAmI %d, createPrincipal %d, deletePrincipal %d; want 3, 3, 1", len(who), len(create), len(del))
	}
	for _, h := range append(append(who, create...), del...) {
		if h.Get("X-Better-Compute") != "1" || h.Get("Authorization") != "Bearer bck_test" {
			t.Errorf("headers %v, want X-Better-Compute and the bearer key", h)
		}
	}
	key := create[0].Get("Idempotency-Key")
	if key == "" || create[1].Get("Idempotency-Key") != key || create[2].Get("Idempotency-Key") != key {
		t.Errorf("createPrincipal attempts sent Idempotency-Key %q, %q, %q; want one key for all",
			key, create[1].Get("Idempotency-Key"), create[2].Get("Idempotency-Key"))
	}
	if who[0].Get("Idempotency-Key") != "" || del[0].Get("Idempotency-Key") != "" {
		t.Error("an Idempotency-Key was sent to a method that does not take one")
	}

	// A key of the caller's own is sent as it is.
	f.mu.Lock()
	f.calls = map[string][]http.Header{}
	f.failures = 0
	f.mu.Unlock()
	if _, err := c.IAM.CreatePrincipal(client.WithIdempotencyKey(ctx, "mine-1"), &iamv1.CreatePrincipalRequest{Name: "y"}); err != nil {
		t.Fatal(err)
	}
	if got := f.headers(iamv1connect.IamServiceCreatePrincipalProcedure)[0].Get("Idempotency-Key"); got != "mine-1" {
		t.Errorf("Idempotency-Key %q, want mine-1", got)
	}
}

// limited answers resource_exhausted (HTTP 429) with "Retry-After: 2" to the first call of each
// procedure, as the API's rate limits and quotas do, then serves the call.
type limited struct {
	flaky
	retryAfter string
}

func (l *limited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.calls[r.URL.Path] = append(l.calls[r.URL.Path], r.Header.Clone())
	n := len(l.calls[r.URL.Path])
	l.mu.Unlock()
	if n == 1 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", l.retryAfter)
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"code":"resource_exhausted","message":"rate limited"}`)
		return
	}
	_, h := iamv1connect.NewIamServiceHandler(&l.flaky)
	h.ServeHTTP(w, r)
}

// TestRetryHonoursRetryAfter: a 429 with Retry-After: 2 is tried again after 2 s, not after the
// 250 ms backoff, by the generated clients and by NewMethodClient (the CLI's); a Retry-After past
// MaxRetryAfter, or past the context's deadline, returns the refusal at once.
func TestRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		waits []time.Duration
	)
	record := client.WithSleep(func(_ context.Context, d time.Duration) error {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return nil
	})
	taken := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		w := waits
		waits = nil
		return w
	}
	serve := func(retryAfter string) string {
		srv := httptest.NewServer(&limited{flaky: flaky{calls: map[string][]http.Header{}}, retryAfter: retryAfter})
		t.Cleanup(srv.Close)
		return srv.URL
	}

	url := serve("2")
	if _, err := client.New(url, record).IAM.WhoAmI(t.Context(), &iamv1.WhoAmIRequest{}); err != nil {
		t.Fatalf("whoAmI after a 429: %v", err)
	}
	if w := taken(); len(w) != 1 || w[0] != 2*time.Second {
		t.Errorf("waits %v, want [2s] (the Retry-After)", w)
	}

	md := iamv1.File_bettercompute_iam_v1_iam_proto.Services().ByName("IamService").Methods().ByName("WhoAmI")
	url = serve("2")
	if _, err := client.NewMethodClient(url, md, record).CallUnary(t.Context(), connect.NewRequest(dynamicpb.NewMessage(md.Input()))); err != nil {
		t.Fatalf("the CLI's client, after a 429: %v", err)
	}
	if w := taken(); len(w) != 1 || w[0] != 2*time.Second {
		t.Errorf("the CLI's client waited %v, want [2s]", w)
	}

	url = serve("120")
	_, err := client.New(url, record).IAM.WhoAmI(t.Context(), &iamv1.WhoAmIRequest{})
	if after, ok := client.RetryAfter(err); connect.CodeOf(err) != connect.CodeResourceExhausted || !ok || after != 2*time.Minute {
		t.Errorf("a Retry-After past MaxRetryAfter: %v (Retry-After %v), want resource_exhausted at once", err, after)
	}
	if w := taken(); len(w) != 0 {
		t.Errorf("waited %v for a Retry-After past MaxRetryAfter", w)
	}

	url = serve("2")
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, err := client.New(url, record).IAM.WhoAmI(ctx, &iamv1.WhoAmIRequest{}); connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("a Retry-After past the deadline: %v, want resource_exhausted at once", err)
	}
	if w := taken(); len(w) != 0 {
		t.Errorf("waited %v past the context's deadline", w)
	}
}

// TestRetryAfterReadsSecondsAndDates: Retry-After in seconds or as an HTTP date (one past is no
// wait); anything else, or no call error, is no Retry-After.
func TestRetryAfterReadsSecondsAndDates(t *testing.T) {
	t.Parallel()
	withHeader := func(v string) error {
		cerr := connect.NewError(connect.CodeResourceExhausted, errors.New("slow down"))
		cerr.Meta().Set("Retry-After", v)
		return fmt.Errorf("call: %w", cerr)
	}
	for _, tc := range []struct {
		err  error
		want time.Duration
		ok   bool
	}{
		{withHeader("2"), 2 * time.Second, true},
		{withHeader(" 0 "), 0, true},
		{withHeader("Wed, 21 Oct 2015 07:28:00 GMT"), 0, true},
		{withHeader("-1"), 0, false},
		{withHeader("soon"), 0, false},
		{withHeader(""), 0, false},
		{errors.New("not a call"), 0, false},
	} {
		if got, ok := client.RetryAfter(tc.err); got != tc.want || ok != tc.ok {
			t.Errorf("RetryAfter(%v) = %v, %v; want %v, %v", tc.err, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := client.RetryAfter(withHeader(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat))); !ok || got < 59*time.Minute || got > time.Hour {
		t.Errorf("an HTTP date an hour ahead: %v, %v", got, ok)
	}
}
