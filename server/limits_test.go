package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/limit"
	"github.com/better-compute/better-compute/internal/limit/limittest"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// serve runs the API as a process does (server.Serve on a real listener) until the test ends,
// and returns its root URL.
func serve(t *testing.T, opts server.Options, limits server.HTTPLimits) string {
	t.Helper()
	api, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, ln, api, slog.New(slog.DiscardHandler), limits) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// TestGzipBombIsRefused: an anonymous request whose body is a megabyte of gzip that inflates to
// 1 GiB is refused with resource_exhausted, at the short route and at the native path, promptly
// and without the server inflating it.
func TestGzipBombIsRefused(t *testing.T) {
	t.Parallel()
	const inflated = 1 << 30
	bomb := limittest.GzipBomb(t, inflated)
	root := serve(t, server.Options{Pool: dbtest.Pool(t), Secret: servertest.Secret}, server.HTTPLimits{})
	for _, tc := range []struct {
		name, path, contentType string
	}{
		{"short route", "/api/nodes/list", "application/json"},
		{"native path", "/api/bettercompute.nodes.v1.NodesService/List", "application/proto"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var status int
			var body []byte
			start := time.Now()
			allocated := limittest.AllocatedDuring(func() {
				req, err := http.NewRequest(http.MethodPost, root+tc.path, bytes.NewReader(bomb))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Content-Type", tc.contentType)
				req.Header.Set("Content-Encoding", "gzip")
				req.Header.Set("Connect-Protocol-Version", "1")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				status = res.StatusCode
				body, _ = io.ReadAll(io.LimitReader(res.Body, 1<<16))
			})
			took := time.Since(start)
			var e struct{ Code, Message string }
			if err := json.Unmarshal(body, &e); err != nil || e.Code != "resource_exhausted" || status != http.StatusTooManyRequests {
				t.Fatalf("%d %s, want 429 resource_exhausted", status, body)
			}
			// The bounded decompressor stopped it, rather than Connect's, which inflates the rest
			// to count it.
			if !strings.Contains(e.Message, "larger than configured max 4194304") || !strings.Contains(e.Message, limit.ErrDecompressedTooLarge.Error()) {
				t.Errorf("message %q: want the limit and the decompressor's refusal", e.Message)
			}
			// The limit is 4 MiB: the server may allocate a few times that, not the 1 GiB.
			if allocated > inflated/8 {
				t.Errorf("the process allocated %d MiB answering a bomb of %d MiB", allocated>>20, inflated>>20)
			}
			if took > 10*time.Second {
				t.Errorf("took %s to refuse", took)
			}
			t.Logf("refused in %s, %d MiB allocated meanwhile", took.Round(time.Millisecond), allocated>>20)
		})
	}
}

// TestOversizedHeadersAreRefused: the http.Server bounds request headers (limits.headerBytes).
func TestOversizedHeadersAreRefused(t *testing.T) {
	t.Parallel()
	root := serve(t, server.Options{Pool: dbtest.Pool(t), Secret: servertest.Secret}, server.HTTPLimits{})
	req, err := http.NewRequest(http.MethodGet, root+"/healthz", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("a", 128<<10)) // twice the default limit
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("status %s, want 431", res.Status)
	}
}
