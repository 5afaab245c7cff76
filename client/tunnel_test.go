package client_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/client/tunneltest"
	tunnelsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1"
)

// TestTunnelEchoAndHalfClose sends 1 MiB and a bit through a tunnel to an echoing end, then
// half-closes: every byte comes back, then the far end's last bytes after the half-close, then
// EOF; every frame was within MaxPayload (the far end's read limit would have failed it).
func TestTunnelEchoAndHalfClose(t *testing.T) {
	t.Parallel()
	ended := make(chan error, 1)
	srv := tunneltest.New(t, tunneltest.Echo(func(err error) { ended <- err }))
	c := client.New(srv.URL, client.WithAPIKey(tunneltest.Key))

	conn, err := c.Tunnel(t.Context(), "node-1", 22)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.Info(); got.GetId() == "" || got.GetNodeId() != "node-1" || got.GetPort() != 22 {
		t.Errorf("Info() = %v, want the created tunnel to node-1 port 22", got)
	}
	if got := conn.RemoteAddr().String(); got != "node-1:22" {
		t.Errorf("RemoteAddr() = %q, want node-1:22", got)
	}
	data := make([]byte, 1<<20+3)
	for i := range data {
		data[i] = byte(rand.N(256))
	}
	wrote := make(chan error, 1)
	go func() {
		if _, err := conn.Write(data); err != nil {
			wrote <- err
			return
		}
		wrote <- conn.CloseWrite()
	}()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("write: %v", err)
	}
	if want := append(append([]byte(nil), data...), tunneltest.Trailer...); !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, want the %d sent and the trailer (%d); equal prefix: %t",
			len(got), len(data), len(tunneltest.Trailer), bytes.HasPrefix(got, data))
	}
	if err := <-ended; err != nil {
		t.Errorf("the far end: %v", err)
	}
	if _, err := conn.Write([]byte("more")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after CloseWrite: %v, want net.ErrClosed", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("close after both sides closed: %v", err)
	}
	h := srv.Headers()
	if len(h) != 1 || h[0].Get("Authorization") != "Bearer "+tunneltest.Key || h[0].Get(client.ClientHeader) != "1" ||
		h[0].Get("Sec-WebSocket-Protocol") != tunnel.Subprotocol {
		t.Errorf("upgrade headers %v, want the bearer key, %s and the subprotocol", h, client.ClientHeader)
	}
}

// TestTunnelAbort: an Abort frame, or a close code alone, ends Read and Write with an error
// that wraps a *TunnelAbortError and names the code.
func TestTunnelAbort(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]tunneltest.Handler{
		"abort frame": tunneltest.Abort(tunnel.CodeDialFailed, "dial tcp 127.0.0.1:22: connection refused"),
		"close code only": func(s *tunnel.WebSocketStream, _ *tunnelsv1.CreateRequest) {
			if _, err := s.ReadFrame(); err == nil {
				_ = s.CloseWith(tunnel.CodeDialFailed, "dial tcp 127.0.0.1:22: connection refused")
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := tunneltest.New(t, h)
			conn, err := client.New(srv.URL, client.WithAPIKey(tunneltest.Key)).Tunnel(t.Context(), "node-1", 22)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write([]byte("SSH-2.0-test\r\n")); err != nil {
				t.Fatal(err)
			}
			_, err = conn.Read(make([]byte, 10))
			var ae *client.TunnelAbortError
			if !errors.As(err, &ae) || ae.Code != tunnel.CodeDialFailed || !strings.Contains(ae.Reason, "connection refused") {
				t.Fatalf("read: %v, want a TunnelAbortError 4005 with the reason", err)
			}
			if !strings.Contains(err.Error(), "4005") {
				t.Errorf("error %q does not name the code", err)
			}
			if _, werr := conn.Write([]byte("x")); !errors.As(werr, &ae) {
				t.Errorf("write after the abort: %v, want the abort", werr)
			}
			if err := conn.Close(); err != nil {
				t.Errorf("close after the abort: %v", err)
			}
		})
	}
}

// TestTunnelRefused: each refusal of docs/tunnels.md is a *TunnelRefusedError with its status
// and reason, and opens nothing.
func TestTunnelRefused(t *testing.T) {
	t.Parallel()
	for _, r := range tunnel.Refusals {
		t.Run(strconv.Itoa(r.Status), func(t *testing.T) {
			t.Parallel()
			srv := tunneltest.New(t, func(*tunnel.WebSocketStream, *tunnelsv1.CreateRequest) { t.Error("a refused tunnel ran") })
			srv.Refuse(r)
			_, err := client.New(srv.URL, client.WithAPIKey(tunneltest.Key)).Tunnel(t.Context(), "node-1", 22)
			checkRefused(t, err, r)
		})
	}
	// The API's text comes as it is; without one, the status says why.
	for name, tc := range map[string]struct{ sent, want tunnel.Refusal }{
		"with a detail": {
			tunnel.Refusal{Status: 410, Reason: "the ticket expired: a ticket is valid for 30s"},
			tunnel.Refusal{Status: 410, Reason: "the ticket expired: a ticket is valid for 30s"},
		},
		"without a text":                {tunnel.Refusal{Status: 503}, tunnel.RefuseNodeOffline},
		"of an unknown status, no text": {tunnel.Refusal{Status: 502}, tunnel.Refusal{Status: 502, Reason: "Bad Gateway"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := tunneltest.New(t, func(*tunnel.WebSocketStream, *tunnelsv1.CreateRequest) { t.Error("a refused tunnel ran") })
			srv.Refuse(tc.sent)
			_, err := client.New(srv.URL, client.WithAPIKey(tunneltest.Key)).Tunnel(t.Context(), "node-1", 22)
			checkRefused(t, err, tc.want)
		})
	}
	t.Run("wrong key", func(t *testing.T) {
		t.Parallel()
		srv := tunneltest.New(t, func(*tunnel.WebSocketStream, *tunnelsv1.CreateRequest) { t.Error("a refused tunnel ran") })
		_, err := client.New(srv.URL, client.WithAPIKey("bck_wrong")).Tunnel(t.Context(), "node-1", 22)
		checkRefused(t, err, tunnel.RefuseUnauthenticated)
		if srv.Opened() != 0 {
			t.Errorf("%d tunnels opened", srv.Opened())
		}
	})
}

func checkRefused(t *testing.T, err error, want tunnel.Refusal) {
	t.Helper()
	var re *client.TunnelRefusedError
	if !errors.As(err, &re) || re.Status != want.Status || re.Reason != want.Reason {
		t.Fatalf("error %v, want a TunnelRefusedError %d %q", err, want.Status, want.Reason)
	}
	if !strings.Contains(err.Error(), strconv.Itoa(want.Status)) || !strings.Contains(err.Error(), want.Reason) {
		t.Errorf("error %q does not name the status and the reason", err)
	}
}

// TestTunnelCloseResets: closing before both sides closed resets the tunnel: the far end sees
// close code 4009. A Read blocked meanwhile returns at once.
func TestTunnelCloseResets(t *testing.T) {
	t.Parallel()
	ended := make(chan error, 1)
	srv := tunneltest.New(t, func(s *tunnel.WebSocketStream, _ *tunnelsv1.CreateRequest) { ended <- tunneltest.Drain(s) })
	conn, err := client.New(srv.URL, client.WithAPIKey(tunneltest.Key)).Tunnel(t.Context(), "node-1", 8888)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 1))
		read <- err
	}()
	start := time.Now()
	if err := conn.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := <-read; !errors.Is(err, net.ErrClosed) {
		t.Errorf("read blocked during Close: %v, want net.ErrClosed", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close and the blocked Read took %v", d)
	}
	var ae *tunnel.AbortError
	if err := <-ended; !errors.As(err, &ae) || ae.Code != tunnel.CodeReset {
		t.Errorf("the far end saw %v, want close code 4009", err)
	}
}

// TestTunnelBadArguments: a port out of range or a cancelled context open nothing.
func TestTunnelBadArguments(t *testing.T) {
	t.Parallel()
	srv := tunneltest.New(t, func(*tunnel.WebSocketStream, *tunnelsv1.CreateRequest) { t.Error("a tunnel ran") })
	c := client.New(srv.URL, client.WithAPIKey(tunneltest.Key))
	for _, port := range []int{0, -1, 65536} {
		if _, err := c.Tunnel(t.Context(), "node-1", port); err == nil || !strings.Contains(err.Error(), "port") {
			t.Errorf("port %d: %v, want an error naming the port", port, err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Tunnel(ctx, "node-1", 22); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v, want context.Canceled", err)
	}
	if srv.Created() != 0 || srv.Opened() != 0 {
		t.Errorf("%d tickets created, %d tunnels opened; want none", srv.Created(), srv.Opened())
	}
}

// TestTunnelDeadlines: deadlines are refused, clearing them is not.
func TestTunnelDeadlines(t *testing.T) {
	t.Parallel()
	srv := tunneltest.New(t, func(s *tunnel.WebSocketStream, _ *tunnelsv1.CreateRequest) { _ = tunneltest.Drain(s) })
	conn, err := client.New(srv.URL, client.WithAPIKey(tunneltest.Key)).Tunnel(t.Context(), "node-1", 22)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for name, set := range map[string]func(time.Time) error{
		"SetDeadline": conn.SetDeadline, "SetReadDeadline": conn.SetReadDeadline, "SetWriteDeadline": conn.SetWriteDeadline,
	} {
		if err := set(time.Now().Add(time.Minute)); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s(a time): %v, want errors.ErrUnsupported", name, err)
		}
		if err := set(time.Time{}); err != nil {
			t.Errorf("%s(zero): %v", name, err)
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/tunnel_frames.json")

// frameVectors is testdata/tunnel_frames.json: the tunnel's WebSocket messages as the Go code
// writes them, the close codes and the refusals, which the TypeScript and Python SDKs' tests
// check their own encoders and tables against.
type frameVectors struct {
	Comment     string          `json:"comment"`
	Subprotocol string          `json:"subprotocol"`
	MaxPayload  int             `json:"max_payload"`
	Messages    []messageVector `json:"messages"`
	Invalid     []string        `json:"invalid_messages"`
	Codes       []codeVector    `json:"codes"`
	Refusals    []refusalVector `json:"refusals"`
}

type messageVector struct {
	Name       string `json:"name"`
	Type       int    `json:"type"`
	Payload    string `json:"payload,omitempty"` // hex, for data
	Code       int    `json:"code,omitempty"`    // for abort
	Reason     string `json:"reason,omitempty"`  // for abort, as given
	Parsed     string `json:"parsed_reason,omitempty"`
	Message    string `json:"message"` // hex of the whole WebSocket message
	ParseOnly  bool   `json:"parse_only,omitempty"`
	ParsedCode int    `json:"parsed_code,omitempty"`
}

type codeVector struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

type refusalVector struct {
	Status int    `json:"status"`
	Reason string `json:"reason"`
}

func TestTunnelFrameVectors(t *testing.T) {
	t.Parallel()
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	v := frameVectors{
		Comment:     "Written by TestTunnelFrameVectors (client/tunnel_test.go, (cd client && go test -run TestTunnelFrameVectors -update)) from client/tunnel; read by the TypeScript and Python SDKs' tests.",
		Subprotocol: tunnel.Subprotocol,
		MaxPayload:  tunnel.MaxPayload,
	}
	data := func(name string, p []byte) {
		v.Messages = append(v.Messages, messageVector{Name: name, Type: int(tunnel.Data), Payload: hex.EncodeToString(p),
			Message: hex.EncodeToString(tunnel.AppendMessage(nil, tunnel.Frame{Type: tunnel.Data, Payload: p}))})
	}
	abort := func(name string, code tunnel.Code, reason string) {
		msg := tunnel.AppendMessage(nil, tunnel.Frame{Type: tunnel.Abort, Payload: tunnel.AbortPayload(code, reason)})
		f, err := tunnel.ParseMessage(msg)
		if err != nil {
			t.Fatal(err)
		}
		_, parsed := tunnel.ParseAbort(f.Payload)
		v.Messages = append(v.Messages, messageVector{Name: name, Type: int(tunnel.Abort), Code: int(code), Reason: reason,
			Parsed: parsed, Message: hex.EncodeToString(msg)})
	}
	data("data", []byte("SSH-2.0-OpenSSH_9.2p1\r\n"))
	data("empty data", nil)
	data("every byte", all)
	v.Messages = append(v.Messages, messageVector{Name: "close-write", Type: int(tunnel.CloseWrite),
		Message: hex.EncodeToString(tunnel.AppendMessage(nil, tunnel.Frame{Type: tunnel.CloseWrite}))})
	abort("abort", tunnel.CodeDialFailed, "dial tcp 127.0.0.1:22: connect: connection refused")
	abort("abort without a reason", tunnel.CodeLeaseEnded, "")
	abort("abort with a reason over 123 bytes", tunnel.CodeNodeGone, strings.Repeat("x", 200))
	abort("abort with a reason over 123 bytes cut at a character", tunnel.CodeIdle, strings.Repeat("é", 100))
	code, reason := tunnel.ParseAbort([]byte{0x0f})
	v.Messages = append(v.Messages, messageVector{Name: "abort without a code", Type: int(tunnel.Abort), ParseOnly: true,
		ParsedCode: int(code), Parsed: reason, Message: "020f"})
	for _, m := range []string{"", "03", "ff00"} {
		b, _ := hex.DecodeString(m)
		if _, err := tunnel.ParseMessage(b); err == nil {
			t.Fatalf("ParseMessage(%q) accepted it", m)
		}
		v.Invalid = append(v.Invalid, m)
	}
	for _, c := range tunnel.Codes {
		v.Codes = append(v.Codes, codeVector{Code: int(c), Description: c.Describe()})
	}
	for _, r := range tunnel.Refusals {
		v.Refusals = append(v.Refusals, refusalVector{Status: r.Status, Reason: r.Reason})
	}
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	const path = "testdata/tunnel_frames.json"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v ((cd client && go test -run TestTunnelFrameVectors -update) writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the frames client/tunnel writes: run (cd client && go test -run TestTunnelFrameVectors -update), and the SDKs' tests", path)
	}
}
