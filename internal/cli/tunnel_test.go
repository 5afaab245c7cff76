package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/client/tunneltest"
	tunnelsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1"
	"github.com/better-compute/better-compute/internal/modules/standard"
)

// runTunnel runs `better-compute tunnel args...` in this process, with in and out as its
// standard input and output.
func runTunnel(ctx context.Context, in io.Reader, out, errOut io.Writer, args ...string) error {
	root := newRootCommand(standard.Modules())
	root.SetArgs(append([]string{"tunnel"}, args...))
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	return root.ExecuteContext(ctx)
}

// TestTunnelStdio carries a connection on standard input and output: what goes in comes back,
// the end of input half-closes, the far end's last bytes arrive, then output ends and the
// command succeeds.
func TestTunnelStdio(t *testing.T) {
	t.Parallel()
	t.Run("reader", func(t *testing.T) {
		t.Parallel()
		inR, inW := io.Pipe()
		testTunnelStdio(t, inR, inW)
	})
	// A pipe, as ssh's ProxyCommand gives: read through the poller (pollableInput).
	t.Run("pipe", func(t *testing.T) {
		t.Parallel()
		inR, inW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = inR.Close() })
		testTunnelStdio(t, inR, inW)
	})
}

func testTunnelStdio(t *testing.T, inR io.Reader, inW io.WriteCloser) {
	t.Helper()
	ended := make(chan error, 1)
	srv := tunneltest.New(t, tunneltest.Echo(func(err error) { ended <- err }))
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runTunnel(t.Context(), inR, outW, io.Discard,
			"--api", srv.URL, "--api-key", tunneltest.Key, "--node", "node-1", "--port", "22", "--stdio")
	}()
	data := make([]byte, 300<<10+7)
	for i := range data {
		data[i] = byte(rand.N(256))
	}
	go func() {
		_, _ = inW.Write(data)
		_ = inW.Close()
	}()
	got, err := io.ReadAll(outR)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(append([]byte(nil), data...), tunneltest.Trailer...); !bytes.Equal(got, want) {
		t.Errorf("output: %d bytes, want the %d of input and the trailer", len(got), len(data))
	}
	if err := <-done; err != nil {
		t.Errorf("tunnel --stdio: %v", err)
	}
	if err := <-ended; err != nil {
		t.Errorf("the far end: %v", err)
	}
}

// TestTunnelStdioAbort: an aborted tunnel ends output and fails the command with the close code
// and reason; run as the binary's main, it exits 1 and says so on standard error.
func TestTunnelStdioAbort(t *testing.T) {
	t.Parallel()
	srv := tunneltest.New(t, tunneltest.Abort(tunnel.CodeDialFailed, "dial tcp 127.0.0.1:22: connection refused"))
	args := []string{"--api", srv.URL, "--api-key", tunneltest.Key, "--node", "node-1", "--port", "22", "--stdio"}

	// A pipe whose writer stays open: the abort must return the read pending on it.
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inR.Close() })
	t.Cleanup(func() { _ = inW.Close() })
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- runTunnel(t.Context(), inR, outW, io.Discard, args...) }()
	go func() { _, _ = inW.Write([]byte("SSH-2.0-test\r\n")) }()
	if _, err := io.ReadAll(outR); err != nil {
		t.Fatal(err)
	}
	err = <-done
	var ae *tunnel.AbortError
	if !errors.As(err, &ae) || ae.Code != tunnel.CodeDialFailed || !strings.Contains(err.Error(), "4005") ||
		!strings.Contains(err.Error(), "connection refused") {
		t.Errorf("tunnel --stdio: %v, want the abort 4005 with its reason", err)
	}

	_, stderr, code := runMain(t, append([]string{"tunnel"}, args...)...)
	if code != 1 || !strings.Contains(stderr, "4005") || !strings.Contains(stderr, "connection refused") {
		t.Errorf("exit code %d, stderr %q; want 1 and the code and reason", code, stderr)
	}
}

// TestTunnelLocal forwards a local port: each connection gets a tunnel (and a ticket) of its
// own, with half-close; Ctrl-C stops the command cleanly.
func TestTunnelLocal(t *testing.T) {
	t.Parallel()
	srv := tunneltest.New(t, tunneltest.Echo(func(err error) {
		if err != nil {
			t.Errorf("the far end: %v", err)
		}
	}))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startLocal(ctx, t, srv)

	const conns = 4
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			msg := fmt.Sprintf("hello %d", i)
			if _, err := conn.Write([]byte(msg)); err != nil {
				t.Error(err)
				return
			}
			if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
				t.Error(err)
				return
			}
			got, err := io.ReadAll(conn)
			if err != nil || string(got) != msg+tunneltest.Trailer {
				t.Errorf("connection %d read %q, %v; want %q", i, got, err, msg+tunneltest.Trailer)
			}
		})
	}
	wg.Wait()
	if srv.Created() != conns || srv.Opened() != conns {
		t.Errorf("%d tickets created, %d tunnels opened; want %d each", srv.Created(), srv.Opened(), conns)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("tunnel --local after Ctrl-C: %v", err)
	}
}

// TestTunnelLocalInterrupted: Ctrl-C resets the open tunnels (close code 4009 at the far end).
func TestTunnelLocalInterrupted(t *testing.T) {
	t.Parallel()
	// The far end signals once a byte came through: the tunnel is open at both ends, and its
	// pump runs. (The server counts a tunnel opened before the client's handshake is done; an
	// interrupt then would abandon the handshake, not reset a tunnel.)
	through, ended := make(chan error, 1), make(chan error, 1)
	srv := tunneltest.New(t, func(s *tunnel.WebSocketStream, _ *tunnelsv1.CreateRequest) {
		f, err := s.ReadFrame()
		if err == nil && f.Type != tunnel.Data {
			err = fmt.Errorf("first frame of type %v, want data", f.Type)
		}
		through <- err
		ended <- tunneltest.Drain(s)
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	addr, done := startLocal(ctx, t, srv)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := <-through; err != nil {
		t.Fatalf("the far end read %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("tunnel --local after Ctrl-C: %v", err)
	}
	var ae *tunnel.AbortError
	if err := <-ended; !errors.As(err, &ae) || ae.Code != tunnel.CodeReset {
		t.Errorf("the far end saw %v, want close code 4009", err)
	}
	if n, err := conn.Read(make([]byte, 1)); err == nil {
		t.Errorf("the local connection is still open: read %d bytes", n)
	}
}

// startLocal runs `tunnel --local 127.0.0.1:0` against srv until ctx ends, and returns the
// address it listens on and its result.
func startLocal(ctx context.Context, t *testing.T, srv *tunneltest.Server) (string, <-chan error) {
	t.Helper()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runTunnel(ctx, nil, outW, io.Discard,
			"--api", srv.URL, "--api-key", tunneltest.Key, "--node", "node-1", "--port", "8888", "--local", "127.0.0.1:0")
		_ = outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no first line: %v (%v)", err, <-done)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	var addr string
	if _, err := fmt.Sscanf(line, "Forwarding %s to node node-1 port 8888\n", &addr); err != nil {
		t.Fatalf("first line %q: %v", line, err)
	}
	return addr, done
}

// TestTunnelFlags: the command refuses what it cannot do before opening anything.
func TestTunnelFlags(t *testing.T) {
	t.Parallel()
	srv := tunneltest.New(t, func(*tunnel.WebSocketStream, *tunnelsv1.CreateRequest) { t.Error("a tunnel ran") })
	api := []string{"--api", srv.URL, "--api-key", tunneltest.Key}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--api", srv.URL, "--api-key", "", "--node", "n", "--port", "22", "--stdio"}, "--api-key"},
		{append(api, "--node", "n", "--port", "22"), "local"},
		{append(api, "--node", "n", "--port", "22", "--stdio", "--local", "127.0.0.1:0"), "local"},
		{append(api, "--node", "n", "--port", "70000", "--stdio"), "--port"},
		{append(api, "--port", "22", "--stdio"), "node"},
	} {
		err := runTunnel(t.Context(), strings.NewReader(""), io.Discard, io.Discard, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("tunnel %v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
	if srv.Created() != 0 {
		t.Errorf("%d tickets created", srv.Created())
	}
}
