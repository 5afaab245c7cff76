package main_test

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/gateway"
	"github.com/better-compute/better-compute/internal/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/proxytest"
	"github.com/better-compute/better-compute/internal/server/servertest"
)

// TestThroughTheProxyEnvironment runs the real bcd with --transport websocket and HTTPS_PROXY
// naming a real HTTP proxy (tinyproxy): the join and the session go through the proxy's CONNECT
// to the gateway's WebSocket listener, and the node is recorded as connected over the WebSocket.
// With the listener's address in NO_PROXY, bcd goes around the proxy. The proxy environment
// never applies to loopback addresses, so the listener is on an address of another interface.
func TestThroughTheProxyEnvironment(t *testing.T) {
	t.Parallel()
	ip := outsideIP(t)
	bcd := buildBcd(t, "proxy-1")[0]
	env := gatewaytest.New(t)
	api := servertest.Start(t, env.Pool, nil)
	nodes := nodesv1connect.NewNodesServiceClient(api.HTTPClient(api.AdminKey), api.URL)

	wsLn, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := env.Bundle.IssueGateway("test", "gw1", nil, []net.IP{ip})
	if err != nil {
		t.Fatal(err)
	}
	outer, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	gw := env.StartGateway("gw1", func(o *gateway.Options) {
		o.WebSocket = &gateway.WebSocket{Listener: wsLn, TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{outer}}}
	})
	proxy := proxytest.StartTinyproxy(t)

	work := t.TempDir()
	caFile := filepath.Join(work, "root-ca.pem")
	if err := os.WriteFile(caFile, env.Bundle.RootPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	proxied := []string{"HTTPS_PROXY=" + proxy.URL(), "https_proxy=", "NO_PROXY=", "no_proxy=", "HTTP_PROXY=", "http_proxy="}
	stateDir := filepath.Join(work, "state")
	runBcdEnv(t, bcd, 0, proxied, "join", "--state-dir", stateDir, "--token", env.Token(1, time.Now().Add(time.Hour)),
		"--gateway", gw.Addr, "--ca-file", caFile, "--transport", "websocket", "--websocket-url", gw.WebSocketURL)
	connects := func() int { return strings.Count(proxy.Log(), "CONNECT") }
	if connects() == 0 {
		t.Fatalf("the join did not go through the proxy; its log:\n%s", proxy.Log())
	}
	dir, _ := state.New(stateDir)
	joined, err := dir.ReadNode()
	if err != nil || joined.Transport != "websocket" || joined.WebSocketURL != gw.WebSocketURL {
		t.Fatalf("node.json: %+v, %v", joined, err)
	}

	// bcd run keeps the transport it joined with.
	before := connects()
	d := startBcdEnv(t, bcd, work, proxied, "run", "--state-dir", stateDir, "--max-backoff", "1s")
	waitTransport(t, nodes, joined.NodeID, "websocket", d)
	if connects() == before {
		t.Errorf("the session did not go through the proxy")
	}
	d.terminate(t)

	// NO_PROXY names the listener: around the proxy, still over the WebSocket.
	before = connects()
	around := []string{"HTTPS_PROXY=" + proxy.URL(), "https_proxy=", "NO_PROXY=" + ip.String(), "no_proxy="}
	d = startBcdEnv(t, bcd, work, around, "run", "--state-dir", stateDir, "--max-backoff", "1s")
	waitTransport(t, nodes, joined.NodeID, "websocket", d)
	if connects() != before {
		t.Errorf("NO_PROXY did not keep the session off the proxy")
	}
}

// waitTransport waits until nodes/get shows the node connected over transport.
func waitTransport(t *testing.T, nodes nodesv1connect.NodesServiceClient, id, transport string, d *daemonProc) {
	t.Helper()
	poll.Until(t, 20*time.Second, "the node is connected over "+transport, func() bool {
		res, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: id})
		return err == nil && res.GetNode().GetConnected() && res.GetNode().GetTransport() == transport
	}, d.logReport())
}

// outsideIP is an IPv4 address of this host that is not loopback; the test is skipped on a host
// without one.
func outsideIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP.To4()
		}
	}
	t.Skip("this host has no IPv4 address besides loopback, and the proxy environment never applies to loopback")
	return nil
}
