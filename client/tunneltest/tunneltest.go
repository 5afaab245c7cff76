// Package tunneltest fakes the API's side of tunnels for the tests of this module's tunnel
// clients (the Go SDK's Client.Tunnel, the CLI's `better-compute tunnel`): tunnels/create hands
// out single-use tickets, and GET {base}/tunnels/{ticket} checks the bearer key, the ticket and
// the subprotocol as the API does, answers the refusals of docs/tunnels.md, upgrades, and runs a
// Handler as the far end of the tunnel (where the API would relay to the node).
package tunneltest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/coder/websocket"

	"github.com/better-compute/better-compute/client/tunnel"
	tunnelsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1/tunnelsv1connect"
)

// Key is the API key the fake requires on the upgrade.
const Key = "bck_tunneltest_key"

// Handler is the far end of one tunnel: it reads and writes the client's frames on s until it
// returns; the fake then closes s (normally, unless the handler closed it otherwise).
type Handler func(s *tunnel.WebSocketStream, req *tunnelsv1.CreateRequest)

// Server is a fake API serving tunnels/create and the tunnel upgrade.
type Server struct {
	// URL is the API's base URL, with the base path /api, for client.New.
	URL string

	handler Handler

	mu      sync.Mutex
	tickets map[string]*ticket // by ticket
	refuse  *tunnel.Refusal
	created int
	opened  int
	headers []http.Header // of the accepted upgrades
}

type ticket struct {
	req   *tunnelsv1.CreateRequest
	spent bool
}

// New starts a fake API whose tunnels run h; it stops when the test ends.
func New(t testing.TB, h Handler) *Server {
	t.Helper()
	s := &Server{handler: h, tickets: map[string]*ticket{}}
	mux := http.NewServeMux()
	path, api := tunnelsv1connect.NewTunnelsServiceHandler(&service{s: s})
	mux.Handle("/api"+path, http.StripPrefix("/api", api))
	mux.HandleFunc("GET /api/tunnels/{ticket}", s.upgrade)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/api"
	return s
}

// Refuse makes every later upgrade answer r before anything else is checked but the key: its
// status, and its reason as a text/plain body as the API writes it (none for an empty reason).
func (s *Server) Refuse(r tunnel.Refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = &r
}

// Created is how many tickets tunnels/create handed out.
func (s *Server) Created() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.created
}

// Opened is how many upgrades were accepted.
func (s *Server) Opened() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opened
}

// Headers are the request headers of the accepted upgrades.
func (s *Server) Headers() []http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.headers...)
}

type service struct {
	tunnelsv1connect.UnimplementedTunnelsServiceHandler
	s *Server
}

func (v *service) Create(_ context.Context, req *tunnelsv1.CreateRequest) (*tunnelsv1.CreateResponse, error) {
	if req.GetNodeId() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("node_id is required"))
	}
	if req.GetPort() < 1 || req.GetPort() > 65535 {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("port must be 1 to 65535, got %d", req.GetPort()))
	}
	tk := rand.Text()
	v.s.mu.Lock()
	v.s.tickets[tk] = &ticket{req: req}
	v.s.created++
	n := v.s.created
	v.s.mu.Unlock()
	return &tunnelsv1.CreateResponse{
		Ticket: tk,
		Url:    "ws" + strings.TrimPrefix(v.s.URL, "http") + "/tunnels/" + tk,
		Tunnel: &tunnelsv1.Tunnel{Id: fmt.Sprintf("tunnel-%d", n), NodeId: req.GetNodeId(), Port: req.GetPort()},
	}, nil
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) {
	refuse := func(f tunnel.Refusal) { http.Error(w, f.Reason, f.Status) }
	if r.Header.Get("Authorization") != "Bearer "+Key {
		refuse(tunnel.RefuseUnauthenticated)
		return
	}
	s.mu.Lock()
	tk, ok := s.tickets[r.PathValue("ticket")]
	var refusal *tunnel.Refusal
	switch {
	case s.refuse != nil:
		refusal = s.refuse
	case !ok:
		refusal = &tunnel.RefuseUnknownTicket
	case tk.spent:
		refusal = &tunnel.RefuseSpentTicket
	case !offers(r, tunnel.Subprotocol):
		refusal = &tunnel.RefuseNotWebSocket
	default:
		tk.spent = true
		s.opened++
		s.headers = append(s.headers, r.Header.Clone())
	}
	s.mu.Unlock()
	if refusal != nil {
		refuse(*refusal)
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{tunnel.Subprotocol}})
	if err != nil {
		return
	}
	ws := tunnel.NewWebSocketStream(context.WithoutCancel(r.Context()), conn)
	s.handler(ws, tk.req)
	_ = ws.Close()
}

// offers reports whether r is a WebSocket upgrade offering subprotocol p.
func offers(r *http.Request, p string) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return false
	}
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for o := range strings.SplitSeq(h, ",") {
			if strings.TrimSpace(o) == p {
				return true
			}
		}
	}
	return false
}

// Trailer is what Echo sends after the client's CloseWrite, before its own: the last bytes a
// half-close must deliver.
const Trailer = "\n-- the node's last bytes --\n"

// Echo is a Handler that writes every Data frame back; after the client's CloseWrite it sends
// Trailer and a CloseWrite of its own, as a server answering a request does. It calls ended with
// nil then, or with what broke the tunnel: a frame over MaxPayload is the protocol error
// WebSocketStream reports, a client's reset an *tunnel.AbortError.
func Echo(ended func(error)) Handler {
	return func(s *tunnel.WebSocketStream, _ *tunnelsv1.CreateRequest) {
		ended(echo(s))
	}
}

func echo(s *tunnel.WebSocketStream) error {
	for {
		f, err := s.ReadFrame()
		if err != nil {
			return err
		}
		switch f.Type {
		case tunnel.Data:
			if err := s.WriteFrame(f); err != nil {
				return err
			}
		case tunnel.CloseWrite:
			if err := s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: []byte(Trailer)}); err != nil {
				return err
			}
			return s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite})
		case tunnel.Abort:
			code, reason := tunnel.ParseAbort(f.Payload)
			return &tunnel.AbortError{Code: code, Reason: reason}
		}
	}
}

// Abort is a Handler that reads the client's first Data frame, then aborts the tunnel with an
// Abort frame of code and reason, as the API relays one from the node, and closes the WebSocket
// with the same code.
func Abort(code tunnel.Code, reason string) Handler {
	return func(s *tunnel.WebSocketStream, _ *tunnelsv1.CreateRequest) {
		if _, err := s.ReadFrame(); err != nil {
			return
		}
		_ = s.WriteFrame(tunnel.Frame{Type: tunnel.Abort, Payload: tunnel.AbortPayload(code, reason)})
		_ = s.CloseWith(code, reason)
	}
}

// Drain reads frames until the tunnel ends and returns why: nil after the client's CloseWrite
// (then the WebSocket's end), the *tunnel.AbortError of a client that reset it.
func Drain(s *tunnel.WebSocketStream) error {
	for {
		f, err := s.ReadFrame()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if f.Type == tunnel.Abort {
			code, reason := tunnel.ParseAbort(f.Payload)
			return &tunnel.AbortError{Code: code, Reason: reason}
		}
	}
}
