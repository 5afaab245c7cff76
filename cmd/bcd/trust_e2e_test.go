package main_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	nodesv1connect "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestFirstNodeWithThePin is a production deployment's first node, made only by the documented
// steps (a migrated database, pki init, the API and a gateway, an admin key, joinTokens/create):
// no root-ca.pem exists anywhere. joinTokens/create prints the root's pin beside the token; the
// real bcd joins with --ca-cert-hash alone, fetching the root from the gateway's handshake, and
// holds a session. A wrong pin (as a server in the gateway's place would meet) is refused before
// the token is sent: nothing is written and the token stays unspent. Before the fix the node
// had no way to join but a file only dev wrote.
func TestFirstNodeWithThePin(t *testing.T) {
	t.Parallel()
	bcd := buildBcd(t, "trust-1")[0]
	env := gatewaytest.New(t)
	api := servertest.Start(t, env.Pool, nil)
	client := api.HTTPClient(api.AdminKey)
	tokens := jointokensv1connect.NewJoinTokensServiceClient(client, api.URL)
	nodes := nodesv1connect.NewNodesServiceClient(client, api.URL)
	gw := startGateway(t, env, "127.0.0.1:0")

	tok, err := tokens.Create(ctx, &jointokensv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	pin := tok.GetCaCertHash()
	if pin != env.Bundle.RootCertHash() || !strings.HasPrefix(pin, "sha256:") {
		t.Fatalf("joinTokens/create: pin %q, want the root's %q", pin, env.Bundle.RootCertHash())
	}

	work := t.TempDir()
	stateDir := filepath.Join(work, "state")
	wrong := "sha256:" + strings.Repeat("ab", 32)
	out := runBcd(t, bcd, 1, "join", "--state-dir", stateDir, "--token", tok.GetToken(), "--gateway", gw.addr, "--ca-cert-hash", wrong)
	if !strings.Contains(out, "no root CA matching --ca-cert-hash") || !strings.Contains(out, pin) {
		t.Errorf("a wrong pin: bcd said %q; want the refusal naming what the server showed", out)
	}
	if _, err := os.Lstat(stateDir); !os.IsNotExist(err) {
		t.Errorf("a wrong pin left the state directory: %v", err)
	}
	if uses := tokenUses(t, env, tok.GetJoinToken().GetId()); uses != 0 {
		t.Errorf("a wrong pin spent the token: %d uses", uses)
	}

	// The right pin, beside a successor's (the flag repeats for a rotation).
	out = runBcd(t, bcd, 0, "join", "--state-dir", stateDir, "--token", tok.GetToken(), "--gateway", gw.addr,
		"--ca-cert-hash", wrong, "--ca-cert-hash", pin)
	if !strings.Contains(out, "Joined as node ") {
		t.Fatalf("join said %q", out)
	}
	checkModes(t, stateDir)
	dir, _ := state.New(stateDir)
	kept, err := os.ReadFile(dir.File(state.RootCAFile))
	if err != nil || !bytes.Equal(kept, env.Bundle.RootPEM()) {
		t.Fatalf("root-ca.pem for run: %q, %v", kept, err)
	}
	joined, err := dir.ReadNode()
	if err != nil {
		t.Fatal(err)
	}
	d := startBcd(t, bcd, work, "run", "--state-dir", stateDir, "--max-backoff", "1s")
	waitTransport(t, nodes, joined.NodeID, "h2", d)
	d.terminate(t)
}

// tokenUses is how many nodes joined with the token.
func tokenUses(t *testing.T, env *gatewaytest.Env, id string) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT uses FROM join_tokens WHERE id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
