package main_test

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/release"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// joinBcd joins a state directory in work through the gateway at addr with a fresh token, and
// returns the directory and the node id.
func joinBcd(t *testing.T, bcd, work string, env *gatewaytest.Env, addr string) (string, string) {
	t.Helper()
	caFile := filepath.Join(work, "root-ca.pem")
	if err := os.WriteFile(caFile, env.Bundle.RootPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(work, "state")
	runBcd(t, bcd, 0, "join", "--state-dir", stateDir, "--token", env.Token(1, time.Now().Add(time.Hour)), "--gateway", addr, "--ca-file", caFile)
	dir, _ := state.New(stateDir)
	n, err := dir.ReadNode()
	if err != nil {
		t.Fatal(err)
	}
	return stateDir, n.NodeID
}

// TestNodeCommandsCannotBecomeRoot runs the real bcd and sends it, through the API, what would
// turn the operator role into a root shell: an upgrade without --release-url, or to a release
// its --release-key did not sign; an exec through a symlink to an unlisted program; an exec
// setting LD_PRELOAD; an exec while draining. All are refused and nothing runs, and an exec'd
// program sees only the fixed PATH and the variables its command may set, though bcd itself
// runs with LD_PRELOAD and BASH_ENV set. (TestUpgradeEndToEnd covers the other refused upgrades.)
func TestNodeCommandsCannotBecomeRoot(t *testing.T) {
	t.Parallel()
	bcd := buildBcd(t, "e2e-1")[0]
	env := gatewaytest.New(t)
	notifier, err := gateway.NewNotifier(env.Pool, env.Bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, env.Pool, func(o *server.Options) { o.Notifier = notifier })
	client := api.HTTPClient(api.AdminKey)
	nodes := nodesv1connect.NewNodesServiceClient(client, api.URL)
	commands := commandsv1connect.NewCommandsServiceClient(client, api.URL)
	gw := startGateway(t, env, "127.0.0.1:0")
	work := t.TempDir()
	stateDir, nodeID := joinBcd(t, bcd, work, env, gw.addr)

	// Releases signed by a key the node does not trust.
	pub, _, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(work, "release.pub")
	if err := os.WriteFile(keyFile, pub.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	releases := newReleases(t)
	releases.publish(t, otherKey, "e2e-9", []byte("#!/bin/sh\necho 'bcd e2e-9 (test)'\n"), nil)
	fetched := func() int {
		releases.mu.Lock()
		defer releases.mu.Unlock()
		n := 0
		for _, h := range releases.hits {
			n += h
		}
		return n
	}
	upgrade := map[string]any{"version": "e2e-9"}
	original, err := os.ReadFile(bcd)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing but bcd itself, unchanged, in its directory: no new file, executable or not.
	untouched := func(what string) {
		t.Helper()
		if got, _ := os.ReadFile(bcd); string(got) != string(original) {
			t.Fatalf("%s: the binary was replaced", what)
		}
		if entries, _ := os.ReadDir(filepath.Dir(bcd)); len(entries) != 1 {
			t.Errorf("%s: bcd's directory holds %d files", what, len(entries))
		}
	}
	refused := func(c *commandsv1.Command, want string) {
		t.Helper()
		if c.GetState() != commandsv1.CommandState_COMMAND_STATE_FAILED || !strings.Contains(c.GetError(), want) {
			t.Errorf("%s command: %s %q; want it failed with %q", c.GetType(), c.GetState(), c.GetError(), want)
		}
	}
	connected := func(d *daemonProc) {
		t.Helper()
		poll.Until(t, 15*time.Second, "the node is connected", func() bool {
			res, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
			return err == nil && res.GetNode().GetConnected() && res.GetNode().GetState() == "ready"
		}, poll.Every(25*time.Millisecond), d.logReport())
	}

	// A listed path that is a symlink to an unlisted program.
	link, marker := filepath.Join(work, "tool"), filepath.Join(work, "touched")
	if err := os.Symlink("/usr/bin/touch", link); err != nil {
		t.Fatal(err)
	}
	d := startBcdEnv(t, bcd, work, []string{"LD_PRELOAD=/nonexistent/preload.so", "BASH_ENV=/nonexistent/bash_env", "GREETING=daemon"},
		"run", "--state-dir", stateDir, "--allow-exec", "/usr/bin/env,"+link, "--max-backoff", "1s")
	connected(d)

	refused(runCommand(t, commands, nodeID, "upgrade", upgrade, "", d), "without --release-url and --release-key")
	if fetched() != 0 {
		t.Fatal("fetched an upgrade without --release-url")
	}
	untouched("upgrade without --release-url")

	refused(runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{link, marker}}, "", d), "symlink to /usr/bin/touch")
	if _, err := os.Stat(marker); err == nil {
		t.Error("the program behind the symlink ran")
	}

	for _, name := range []string{"LD_PRELOAD", "BASH_ENV", "PATH"} {
		c := runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{"/usr/bin/env"}, "env": map[string]any{name: "/tmp/x"}}, "", d)
		refused(c, "may not be set")
	}
	c := runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{"/usr/bin/env"}, "env": map[string]any{"LANG": "C.UTF-8", "TZ": "UTC"}}, "", d)
	want := "PATH=" + host.ExecPath + "\nLANG=C.UTF-8\nTZ=UTC\n"
	if got := c.GetResult().GetFields()["stdout"].GetStringValue(); c.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED || got != want {
		t.Errorf("env: %s, printed %q; want %q", c.GetState(), got, want)
	}
	if code := d.terminate(t); code != 0 {
		t.Errorf("bcd run exited %d", code)
	}

	// Half of the upgrade flags is refused at start, naming the flag.
	out := runBcd(t, bcd, 1, "run", "--state-dir", stateDir, "--release-url", releases.URL+"/bc")
	if !strings.Contains(out, "--release-url needs at least one --release-key") {
		t.Errorf("--release-url alone: %s", out)
	}
	out = runBcd(t, bcd, 1, "run", "--state-dir", stateDir, "--release-key", keyFile)
	if !strings.Contains(out, "--release-key needs --release-url") {
		t.Errorf("--release-key alone: %s", out)
	}
	out = runBcd(t, bcd, 1, "run", "--state-dir", stateDir, "--release-url", "file:///srv/releases", "--release-key", keyFile)
	if !strings.Contains(out, `--release-url "file:///srv/releases": not an http(s) URL`) {
		t.Errorf("a file release URL: %s", out)
	}

	d = startBcd(t, bcd, work, "run", "--state-dir", stateDir, "--max-backoff", "1s", "--allow-exec", "/usr/bin/env",
		"--release-url", releases.URL+"/bc", "--release-key", keyFile)
	connected(d)
	refused(runCommand(t, commands, nodeID, "upgrade", upgrade, "", d), "none of this node's release keys ("+pub.ID.String()+")")
	if n := releases.hitsOf("e2e-9"); n != 0 {
		t.Fatalf("fetched the binary of a release signed by another key %d times", n)
	}
	untouched("upgrade signed by another key")

	if c := runCommand(t, commands, nodeID, "drain", map[string]any{}, "", d); c.GetState() != commandsv1.CommandState_COMMAND_STATE_SUCCEEDED {
		t.Fatalf("drain: %v", c)
	}
	refused(runCommand(t, commands, nodeID, "exec", map[string]any{"argv": []any{"/usr/bin/env"}}, "", d), "draining")
	st := status(t, bcd, stateDir, 0)
	if !st.Draining || !st.AllowUpgrade || st.ReleaseURL != releases.URL+"/bc" || strings.Join(st.ReleaseKeys, ",") != pub.ID.String() {
		t.Errorf("bcd status: %+v", st)
	}
}

// TestGatewayIdentityChecked runs the real bcd against servers whose certificates chain to the
// root it trusts but are not a gateway's of its trust domain: an internal service's certificate
// of the same deployment, and a gateway's of another trust domain. bcd refuses both in the
// handshake, says why in bcd status, and sends them nothing.
func TestGatewayIdentityChecked(t *testing.T) {
	t.Parallel()
	bcd := buildBcd(t, "e2e-1")[0]
	env := gatewaytest.New(t)
	gw := startGateway(t, env, "127.0.0.1:0")
	work := t.TempDir()
	stateDir, _ := joinBcd(t, bcd, work, env, gw.addr)

	// impostor serves TLS with certPEM and counts the requests that reach it.
	impostor := func(certPEM, keyPEM []byte) (string, *atomic.Int64) {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		var reached atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached.Add(1)
			http.Error(w, "impostor", http.StatusServiceUnavailable)
		}))
		srv.EnableHTTP2 = true
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.Listener.Addr().String(), &reached
	}
	loopback := []net.IP{net.ParseIP("127.0.0.1")}

	// The same deployment's internal certificate: it chains to the same root.
	certPEM, keyPEM, err := env.Bundle.IssueInternal("api", nil, loopback)
	if err != nil {
		t.Fatal(err)
	}
	internalAddr, internalReached := impostor(certPEM, keyPEM)

	// Another deployment's gateway, trusted as the root in a copy of the state directory.
	other, err := pki.Init(ctx, dbtest.Pool(t), gatewaytest.Secret, "other.test")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err = other.IssueGateway("test", "gw9", nil, loopback)
	if err != nil {
		t.Fatal(err)
	}
	otherAddr, otherReached := impostor(certPEM, keyPEM)
	otherState := copyState(t, stateDir)
	if err := os.WriteFile(filepath.Join(otherState, state.RootCAFile), other.RootPEM(), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, stateDir, addr string
		reached              *atomic.Int64
		want                 string
	}{
		{"internal certificate", stateDir, internalAddr, internalReached, "identity spiffe://" + gatewaytest.TrustDomain + "/internal/api is not a gateway identity"},
		{"other trust domain", otherState, otherAddr, otherReached, `is from trust domain "other.test", not "` + gatewaytest.TrustDomain + `"`},
	} {
		d := startBcd(t, bcd, work, "run", "--state-dir", tc.stateDir, "--gateway", tc.addr, "--max-backoff", "1s")
		var st host.Status
		poll.Until(t, 15*time.Second, tc.name+": bcd status names the refusal", func() bool {
			// Exit 3 until the daemon answers on its socket.
			out, err := exec.CommandContext(ctx, bcd, "status", "--json", "--state-dir", tc.stateDir).Output()
			return err == nil && json.Unmarshal(out, &st) == nil && strings.Contains(st.LastError, tc.want)
		}, poll.Every(25*time.Millisecond), d.logReport())
		if st.Connected || tc.reached.Load() != 0 {
			t.Errorf("%s: connected %v, %d requests reached the impostor; last error %q", tc.name, st.Connected, tc.reached.Load(), st.LastError)
		}
		if !strings.Contains(st.LastError, "not a gateway's certificate") {
			t.Errorf("%s: last error %q", tc.name, st.LastError)
		}
		d.terminate(t)
	}
}
