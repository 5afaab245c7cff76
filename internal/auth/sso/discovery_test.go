package sso

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDiscoveryFailureIsCached: 1,000 lookups of an issuer whose discovery fails (concurrent, as
// a flood of sign-in starts makes them) fetch its document once, not once a lookup; the failure
// is answered from memory for FailureTTL, after which one lookup tries again, and a success
// replaces it.
func TestDiscoveryFailureIsCached(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	var up atomic.Bool
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if !up.Load() || r.URL.Path != DiscoveryPath {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"issuer":"` + srv.URL + `","jwks_uri":"` + srv.URL + `/keys"}`))
	}))
	t.Cleanup(srv.Close)
	clk := newClock()
	d := NewDiscovery(Options{AllowPrivate: true, Now: clk.Now, Logger: slog.New(slog.DiscardHandler)})
	ctx := t.Context()

	lookups := func(n int) {
		t.Helper()
		var succeeded atomic.Int64
		for round := 0; round < n; round += 50 { // 50 at a time, one round after another
			var wg sync.WaitGroup
			for range min(50, n-round) {
				wg.Go(func() {
					if _, err := d.Provider(ctx, srv.URL); err == nil {
						succeeded.Add(1)
					} else if !errors.Is(err, ErrProvider) {
						t.Errorf("lookup: %v, want a provider error", err)
					}
				})
			}
			wg.Wait()
		}
		if up.Load() && succeeded.Load() != int64(n) {
			t.Errorf("%d of %d lookups succeeded", succeeded.Load(), n)
		}
	}
	lookups(1000)
	if n := hits.Load(); n != 1 {
		t.Fatalf("1,000 lookups of a failing issuer fetched it %d times, want 1", n)
	}
	clk.Advance(FailureTTL - time.Second)
	lookups(100)
	if n := hits.Load(); n != 1 {
		t.Fatalf("lookups within FailureTTL fetched %d times in all, want 1", n)
	}
	clk.Advance(2 * time.Second)
	up.Store(true)
	lookups(100)
	if n := hits.Load(); n != 2 {
		t.Fatalf("lookups after FailureTTL fetched %d times in all, want 2", n)
	}
	// Refresh (a method being saved, doctor) always fetches.
	if _, err := d.Refresh(context.WithoutCancel(ctx), srv.URL); err != nil || hits.Load() != 3 {
		t.Fatalf("refresh: %v, %d fetches", err, hits.Load())
	}
}
