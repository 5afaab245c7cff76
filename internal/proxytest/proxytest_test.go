package proxytest

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
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// testCA returns a self-signed CA and a certificate it issued for 127.0.0.1, as PEM.
func testCA(t *testing.T) (pool *x509.CertPool, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proxytest CA"},
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
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(ca)
	return pool, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
}

// echoServer is a plain-HTTP WebSocket server that sends every message back.
func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.CloseNow() }()
		for {
			typ, b, err := c.Read(r.Context())
			if err != nil {
				return
			}
			if err := c.Write(r.Context(), typ, b); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func dialWS(t *testing.T, ctx context.Context, u string, pool *x509.CertPool) *websocket.Conn {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{HTTPClient: client})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

func echo(t *testing.T, ctx context.Context, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if string(b) != msg {
		t.Fatalf("echo = %q, want %q", b, msg)
	}
}

func TestNginxProxiesWebSocketAndRestarts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, certPEM, keyPEM := testCA(t)
	upstream := echoServer(t)
	ng := StartNginx(t, NginxOptions{
		Upstream: upstream.Listener.Addr().String(), Path: "/daemon", CertPEM: certPEM, KeyPEM: keyPEM,
	})
	if !strings.HasPrefix(ng.URL("/daemon"), "wss://127.0.0.1:") {
		t.Fatalf("URL = %s", ng.URL("/daemon"))
	}

	c := dialWS(t, ctx, ng.URL("/daemon"), pool)
	echo(t, ctx, c, "hello through nginx")

	readErr := make(chan error, 1)
	go func() {
		_, _, err := c.Read(ctx)
		readErr <- err
	}()
	addr := ng.Addr()
	ng.Restart()
	if ng.Addr() != addr {
		t.Fatalf("Restart moved nginx from %s to %s", addr, ng.Addr())
	}
	select {
	case err := <-readErr:
		if err == nil {
			t.Fatal("the connection through the old nginx read a message instead of ending")
		}
		t.Logf("the connection through the old nginx ended: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatalf("the connection through the old nginx is still open after Restart\n%s", ng.Log())
	}

	c2 := dialWS(t, ctx, ng.URL("/daemon"), pool)
	echo(t, ctx, c2, "hello after restart")

	ng.Stop()
	ng.Stop()
	if accepts(addr) {
		t.Fatalf("nginx still accepts on %s after Stop", addr)
	}
}

func TestTinyproxyConnect(t *testing.T) {
	t.Parallel()
	tp := StartTinyproxy(t)
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "through the proxy")
	}))
	t.Cleanup(target.Close)

	proxy, err := url.Parse(tp.URL())
	if err != nil {
		t.Fatal(err)
	}
	tr := target.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxy)
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, target.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("GET %s via %s: %v\n%s", target.URL, tp.URL(), err, tp.Log())
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "through the proxy" {
		t.Fatalf("body = %q, %v", body, err)
	}
	targetAddr := target.Listener.Addr().String()
	if !strings.Contains(tp.Log(), "CONNECT "+targetAddr) {
		t.Fatalf("tinyproxy's log shows no CONNECT to %s:\n%s", targetAddr, tp.Log())
	}
}

// TestTinyproxyIsNotTLS pins what a TLS client sees when it is pointed straight at an HTTP
// proxy: tinyproxy waits for an HTTP request, so the handshake hears nothing until the client's
// own deadline, or until tinyproxy's Timeout (or at once, when it took the ClientHello for a bad
// request line), when it answers with an HTTP error that Go reports as a tls.RecordHeaderError.
func TestTinyproxyIsNotTLS(t *testing.T) {
	t.Parallel()
	tp := StartTinyproxyWith(t, TinyproxyOptions{Timeout: 2 * time.Second})
	d := &tls.Dialer{Config: &tls.Config{ServerName: "127.0.0.1"}}

	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", tp.Addr())
	if err == nil {
		_ = c.Close()
		t.Fatal("a TLS handshake with tinyproxy succeeded")
	}
	// Usually tinyproxy still waits for the rest of a request line; when it has read the whole
	// ClientHello as one bad line it answers at once, which Go reports as a record header error.
	if !errors.Is(err, context.DeadlineExceeded) && !errors.As(err, new(tls.RecordHeaderError)) {
		t.Fatalf("tls dial to tinyproxy with a short deadline: %T %v, want the deadline or a record header error\n%s", err, err, tp.Log())
	}
	t.Logf("before tinyproxy's Timeout: %T: %v", err, err)

	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err = d.DialContext(ctx, "tcp", tp.Addr())
	if err == nil {
		_ = c.Close()
		t.Fatal("a TLS handshake with tinyproxy succeeded")
	}
	var rh tls.RecordHeaderError
	if !errors.As(err, &rh) {
		t.Fatalf("tls dial to tinyproxy: %T %v, want a tls.RecordHeaderError\n%s", err, err, tp.Log())
	}
	if string(rh.RecordHeader[:]) != "HTTP/" {
		t.Fatalf("tinyproxy's answer starts %q, want an HTTP response", rh.RecordHeader[:])
	}
	t.Logf("after tinyproxy's Timeout: %T: %v (record header %q)", err, err, rh.RecordHeader[:])
}
