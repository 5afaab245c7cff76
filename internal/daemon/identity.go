// Package daemon is the node side of the daemon protocol: joining with a token and a CSR (the
// private key never leaves the node), holding the Session stream with reconnects, backoff and
// jitter, renewing the certificate before it expires, running commands through handlers that
// honour idempotency keys, and opening tunnels to the loopback ports of its own allow list
// (tunnel.go). It talks only to gateways: a server's certificate must chain to the root CA and
// carry spiffe://<trust domain>/gateway/<region>/<id> of the node's trust domain. The real node
// agent (cmd/bcd) and the FakeDaemon used by tests, dev and the simulator are both an Agent;
// they differ in their handlers, inventory and state store.
package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/pki/spiffeid"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// Identity is what a node keeps after joining.
type Identity struct {
	NodeID      string
	TrustDomain string
	Key         *ecdsa.PrivateKey
	// ChainPEM is the node certificate followed by its CA.
	ChainPEM []byte
	// RootPEM is the CA that gateways' certificates chain to.
	RootPEM []byte
}

// NotAfter is when the node certificate expires.
func (id *Identity) NotAfter() (time.Time, error) {
	leaf, err := id.leaf()
	if err != nil {
		return time.Time{}, err
	}
	return leaf.NotAfter, nil
}

func (id *Identity) leaf() (*x509.Certificate, error) {
	block, _ := pem.Decode(id.ChainPEM)
	if block == nil {
		return nil, errors.New("certificate chain: no PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}

// Certificate is the identity as a TLS client certificate: the leaf alone. Gateways trust the
// node CAs themselves, so sending the node CA too would only make every gateway parse and keep
// a copy of it for each connection.
func (id *Identity) Certificate() (tls.Certificate, error) {
	keyDER, err := x509.MarshalECPrivateKey(id.Key)
	if err != nil {
		return tls.Certificate{}, err
	}
	cert, err := tls.X509KeyPair(id.ChainPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		return tls.Certificate{}, err
	}
	cert.Certificate = cert.Certificate[:1]
	return cert, nil
}

// NewKey generates a node key (ECDSA P-256).
func NewKey() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }

// NewCSR makes a certificate request for key. It names no identity: the gateway assigns it.
func NewCSR(key *ecdsa.PrivateKey, hostname string) ([]byte, error) {
	return x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: hostname}}, key)
}

// Dialer holds how a node reaches a gateway.
type Dialer struct {
	// Gateway is "host:port".
	Gateway string
	// ServerName overrides the name the gateway's certificate is checked against (default: the
	// host of Gateway).
	ServerName string
	// RootCAs, when set, verifies gateways instead of a pool parsed from the root PEM at every
	// connection: the simulator shares one among thousands of daemons.
	RootCAs *x509.CertPool
	// DialContext, when set, opens the TCP connections (TLS is added over them), so the
	// simulator can inject latency and break connections. Default: a plain net.Dialer.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TunnelDialContext, when set, opens the TCP connections that carry tunnels' data-plane
	// streams instead of DialContext, so the simulator can delay the data plane alone.
	TunnelDialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	// Transport is how connections reach the gateway (transport.go); TransportH2 when empty.
	Transport Transport
	// WebSocketURL is the gateway's WebSocket listener (ws:// or wss://); by default wss:// on
	// port 443 of Gateway's host, at wsnet.DefaultPath.
	WebSocketURL string
	// Proxy chooses the HTTP proxy of the WebSocket's upgrade; http.ProxyFromEnvironment
	// (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) when nil. The direct path never uses a proxy.
	Proxy func(*http.Request) (*url.URL, error)
	// WebSocketRootCAs verifies the WebSocket's outer TLS; by default the system's roots and the
	// deployment's root.
	WebSocketRootCAs *x509.CertPool
	// pins, set by FetchRoot only, let the WebSocket's outer TLS pass with a root matching one
	// of them, before the deployment's root is known.
	pins []string
	// Choice is what TransportAuto learns, shared by every connection of the daemon; without
	// one, each connection tries the direct path first.
	Choice *Choice
}

// Join spends a join token for a new identity. rootPEM verifies the gateway (for example the
// file given to `bcd join --ca-file`).
func (d Dialer) Join(ctx context.Context, rootPEM []byte, token, hostname string) (*Identity, error) {
	key, err := NewKey()
	if err != nil {
		return nil, fmt.Errorf("generate node key: %w", err)
	}
	csr, err := NewCSR(key, hostname)
	if err != nil {
		return nil, fmt.Errorf("make CSR: %w", err)
	}
	// The node has no trust domain yet: any gateway's identity passes the handshake, and the
	// trust domain the join answers with must be that gateway's.
	var seen atomic.Pointer[spiffeid.Gateway]
	client, tr := d.client(rootPEM, nil, "", func(g spiffeid.Gateway) { seen.Store(&g) })
	// The join connection is used once: do not leave it open beside the session's.
	defer tr.CloseIdleConnections()
	res, err := client.Join(ctx, &daemonv1.JoinRequest{Token: token, Csr: csr, Hostname: hostname})
	if err != nil {
		return nil, fmt.Errorf("join via %s: %w", d.Gateway, err)
	}
	gw := seen.Load()
	if gw == nil {
		return nil, fmt.Errorf("join via %s: %w: no gateway identity was checked", d.Gateway, ErrNotGateway)
	}
	if gw.TrustDomain != res.GetTrustDomain() {
		return nil, fmt.Errorf("join via %s: the answer names trust domain %q, but the gateway is of %q; not joined", d.Gateway, res.GetTrustDomain(), gw.TrustDomain)
	}
	return &Identity{
		NodeID: res.GetNodeId(), TrustDomain: res.GetTrustDomain(), Key: key,
		ChainPEM: res.GetCertificateChain(), RootPEM: res.GetRootCa(),
	}, nil
}

// idleTimeout closes a daemon's connections that carry no stream.
const idleTimeout = 90 * time.Second

// client returns a DaemonService client over HTTP/2 with TLS, presenting cert when given, and
// its transport (whose connections the caller closes when done with it). It talks only to a
// gateway of trustDomain (any trust domain when empty): see verifyGateway. seen, when set, is
// told every gateway the transport connects to.
func (d Dialer) client(rootPEM []byte, cert *tls.Certificate, trustDomain string, seen func(spiffeid.Gateway)) (daemonv1connect.DaemonServiceClient, *http.Transport) {
	cfg := d.tlsConfig(rootPEM, cert, trustDomain, seen)
	tr := &http.Transport{
		TLSClientConfig:   cfg,
		Protocols:         new(http.Protocols),
		ForceAttemptHTTP2: true,
		// Find a dead gateway without waiting for TCP: the session is otherwise quiet between
		// heartbeats.
		HTTP2:          &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second},
		DialTLSContext: d.dialTLS(cfg, rootPEM, d.DialContext),
		// A connection left without streams (the join's, or one whose certificate was renewed)
		// is closed rather than kept alive by pings forever.
		IdleConnTimeout: idleTimeout,
	}
	tr.Protocols.SetHTTP2(true)
	return daemonv1connect.NewDaemonServiceClient(&http.Client{Transport: tr}, d.baseURL(), connect.WithGRPC()), tr
}

// dataPlane returns the HTTP/2 client of tunnels' data-plane streams and its transport: the
// same gateway, trust check and client certificate as the session's, on connections of its
// own with the tunnel windows (tunnelhop.StreamWindow, tunnelhop.ConnWindow), so bulk data never
// shares the session's connection or flow-control window.
func (d Dialer) dataPlane(rootPEM []byte, cert *tls.Certificate, trustDomain string) (*http.Client, *http.Transport) {
	dial := d.TunnelDialContext
	if dial == nil {
		dial = d.DialContext
	}
	cfg := d.tlsConfig(rootPEM, cert, trustDomain, nil)
	tr := &http.Transport{
		TLSClientConfig:   cfg,
		Protocols:         new(http.Protocols),
		ForceAttemptHTTP2: true,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream:     tunnelhop.StreamWindow,
			MaxReceiveBufferPerConnection: tunnelhop.ConnWindow,
			MaxReadFrameSize:              tunnelhop.MaxFrameSize,
			// A tunnel may be quiet for its whole idle timeout: find a dead gateway anyway.
			SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second,
		},
		DialTLSContext:  d.dialTLS(cfg, rootPEM, dial),
		IdleConnTimeout: idleTimeout,
	}
	tr.Protocols.SetHTTP2(true)
	return &http.Client{Transport: tr}, tr
}

// baseURL is the gateway's URL, which the session and the data plane share.
func (d Dialer) baseURL() string { return "https://" + d.Gateway }

// tlsConfig is how a daemon's connections to a gateway are secured: TLS 1.3, HTTP/2, the
// gateway checked against the root and trustDomain, cert presented when given.
func (d Dialer) tlsConfig(rootPEM []byte, cert *tls.Certificate, trustDomain string, seen func(spiffeid.Gateway)) *tls.Config {
	roots := d.RootCAs
	if roots == nil {
		roots = x509.NewCertPool()
		roots.AppendCertsFromPEM(rootPEM)
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: d.ServerName, NextProtos: []string{"h2"},
		VerifyConnection: verifyGateway(d.Gateway, trustDomain, seen),
	}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return cfg
}

// ErrNotGateway is the error of a handshake with a server whose certificate chains to the
// deployment's root but is not a gateway's of the node's trust domain (an internal service's,
// a node's, or another deployment's): the daemon sends it nothing.
var ErrNotGateway = spiffeid.ErrNotGateway

// verifyGateway is the check crypto/tls runs after it has verified the server's chain (to the
// root CA) and name: the leaf must carry the SPIFFE ID spiffe://<trustDomain>/gateway/<region>/<id>,
// because internal servers' certificates chain to the same root (see pki.Bundle.IssueGateway).
// It runs on every handshake, resumed ones included.
func verifyGateway(addr, trustDomain string, seen func(spiffeid.Gateway)) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 || len(cs.VerifiedChains) == 0 {
			return fmt.Errorf("gateway %s: %w: no verified certificate", addr, ErrNotGateway)
		}
		gw, err := spiffeid.GatewayOf(cs.PeerCertificates[0], trustDomain)
		if err != nil {
			return fmt.Errorf("gateway %s refused: %w", addr, err)
		}
		if seen != nil {
			seen(gw)
		}
		return nil
	}
}
