package main_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/proxytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestThroughTheProxyEnvironment runs the real bcd with --transport websocket and HTTPS_PROXY
// naming a real HTTP proxy (tinyproxy): the join and the session go through the proxy's CONNECT
// to the gateway's WebSocket listener, and the node is recorded as connected over the WebSocket.
// With the listener's name in NO_PROXY, bcd goes around the proxy.
//
// Everything stays on loopback. Go's proxy environment never applies to "localhost" or a
// loopback address, but it does to a name, so the WebSocket URL names proxytest.LoopbackName,
// which bcd and tinyproxy resolve to 127.0.0.1 through a private /etc/hosts in a mount
// namespace of their own (proxytest.HostsNamespace; the test is skipped where that is not
// allowed). The WebSocket's outer TLS is signed by a CA of its own (a load balancer's): bcd join
// is given it with --websocket-ca-file and bcd run is not, so run uses the copy join kept (before
// it was kept, run looped on an unknown-authority error). The join has only the root's pin.
func TestThroughTheProxyEnvironment(t *testing.T) {
	t.Parallel()
	ns := proxytest.HostsNamespace(t)
	bcd := buildBcd(t, "proxy-1")[0]
	env := gatewaytest.New(t)
	api := servertest.Start(t, env.Pool, nil)
	nodes := nodesv1connect.NewNodesServiceClient(api.HTTPClient(api.AdminKey), api.URL)

	wsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	lbCA, outer := loadBalancerCert(t, proxytest.LoopbackName)
	lbCAFile := filepath.Join(work, "lb-ca.pem")
	if err := os.WriteFile(lbCAFile, lbCA, 0o644); err != nil {
		t.Fatal(err)
	}
	gw := env.StartGateway("gw1", func(o *gateway.Options) {
		o.WebSocket = &gateway.WebSocket{Listener: wsLn, TLS: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{outer}}}
	})
	u, err := url.Parse(gw.WebSocketURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = net.JoinHostPort(proxytest.LoopbackName, u.Port())
	wsURL := u.String()
	proxy := proxytest.StartTinyproxyWith(t, proxytest.TinyproxyOptions{Wrap: ns})
	inNS := append(ns[1:len(ns):len(ns)], bcd)

	proxied := []string{"HTTPS_PROXY=" + proxy.URL(), "https_proxy=", "NO_PROXY=", "no_proxy=", "HTTP_PROXY=", "http_proxy="}
	stateDir := filepath.Join(work, "state")
	runBcdEnv(t, ns[0], 0, proxied, append(inNS, "join", "--state-dir", stateDir, "--token", env.Token(1, time.Now().Add(time.Hour)),
		"--gateway", gw.Addr, "--ca-cert-hash", env.Bundle.RootCertHash(), "--transport", "websocket", "--websocket-url", wsURL,
		"--websocket-ca-file", lbCAFile)...)
	connects := func() int { return strings.Count(proxy.Log(), "CONNECT") }
	if connects() == 0 || !strings.Contains(proxy.Log(), proxytest.LoopbackName) {
		t.Fatalf("the join did not go through the proxy to %s; its log:\n%s", proxytest.LoopbackName, proxy.Log())
	}
	dir, _ := state.New(stateDir)
	joined, err := dir.ReadNode()
	if err != nil || joined.Transport != "websocket" || joined.WebSocketURL != wsURL {
		t.Fatalf("node.json: %+v, %v", joined, err)
	}
	if kept, err := dir.WebSocketCA(); err != nil || string(kept) != string(lbCA) {
		t.Fatalf("the WebSocket's CA kept at join: %q, %v", kept, err)
	}
	if err := os.Remove(lbCAFile); err != nil { // run must not need the file given to join
		t.Fatal(err)
	}

	// bcd run keeps the transport, the URL and the WebSocket's CA it joined with.
	before := connects()
	d := startBcdEnv(t, ns[0], work, proxied, append(inNS, "run", "--state-dir", stateDir, "--max-backoff", "1s")...)
	waitTransport(t, nodes, joined.NodeID, "websocket", d)
	if connects() == before {
		t.Errorf("the session did not go through the proxy")
	}
	d.terminate(t)

	// NO_PROXY names the listener: around the proxy, still over the WebSocket.
	before = connects()
	around := []string{"HTTPS_PROXY=" + proxy.URL(), "https_proxy=", "NO_PROXY=" + proxytest.LoopbackName, "no_proxy="}
	d = startBcdEnv(t, ns[0], work, around, append(inNS, "run", "--state-dir", stateDir, "--max-backoff", "1s")...)
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

// loadBalancerCert is a CA of its own (PEM) and a serving certificate it signed for name, as a
// load balancer in front of the WebSocket listener would have: neither the system's roots nor
// the deployment's root trust it.
func loadBalancerCert(t *testing.T, name string) ([]byte, tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "load balancer test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key}
}
