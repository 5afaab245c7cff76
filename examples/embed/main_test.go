package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	compute "github.com/better-compute/better-compute"
	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/computetest"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
)

func TestMain(m *testing.M) { computetest.Main(m) }

// TestEmbedded runs the program on a fresh database: its own page and the API under /compute/
// are served side by side, and the API answers through the Go SDK.
func TestEmbedded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := newApp(ctx, compute.Config{
		DatabaseURL: computetest.DatabaseURL(t), Secret: "embed-example-secret-0123456789abcdef",
		Modules: compute.StandardModules(),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	base := "http://" + ln.Addr().String()
	for path, want := range map[string]string{"/": "own home page", "/compute/healthz": "ok"} {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %q, want 200 with %q", path, res.StatusCode, body, want)
		}
	}
	key, err := a.d.MintAdminKey(ctx, "embed-example")
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(base+"/compute/api", client.WithAPIKey(key))
	if _, err := c.Nodes.List(ctx, &nodesv1.ListRequest{}); err != nil {
		t.Fatalf("nodes/list through the embedded API: %v", err)
	}
}
