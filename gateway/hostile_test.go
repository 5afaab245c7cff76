package gateway_test

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
)

// hostile are strings a node controls that have ended sessions: a NUL (PostgreSQL stores it in
// neither text nor jsonb), control characters (%q writes them as Go escapes, not JSON), a line
// separator, quotes and backslashes, invalid UTF-8 (protobuf cannot send it) and a long string.
var hostile = []string{"\x00", "a\x00b", "\x01", "\x1b[2J", "\u2028", `"\`, "\xff\xfe", strings.Repeat("\x00\"\\\x01", 2000)}

// TestJoinHostileHostnames: a hostname with control characters is refused naming hostname;
// one with quotes, backslashes or a line separator is stored as given, in the node and in its
// node.joined event; invalid UTF-8 is refused at the protocol edge.
func TestJoinHostileHostnames(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw1")
	c := newRawNode(t, gw.addr, e.bundle.RootPEM(), nil)
	token := e.token(100, time.Now().Add(time.Hour))
	key, err := daemon.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	join := func(hostname string) (*daemonv1.JoinResponse, error) {
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendString(b, token)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, csr)
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendString(b, hostname)
		r := raw(b)
		res, err := c.join.CallUnary(ctx, connect.NewRequest(&r))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	for _, h := range append(hostile, `"quoted\" \\ host"`, "\u2028\u2029-"+strings.Repeat("é", 100)) {
		res, err := join(h)
		switch {
		case strings.ContainsFunc(h, func(r rune) bool { return r < 0x20 || r == 0x7f }) && len(h) <= 253:
			if !refusedNaming(err, "hostname") {
				t.Errorf("hostname %.20q: %v, want invalid_argument naming hostname", h, err)
			}
		case len(h) > 253:
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("hostname of %d bytes: %v, want invalid_argument", len(h), err)
			}
		case !utf8.ValidString(h):
			if connect.CodeOf(err) != connect.CodeInvalidArgument {
				t.Errorf("hostname %q: %v, want invalid_argument", h, err)
			}
		default:
			if err != nil {
				t.Errorf("hostname %.20q: %v", h, err)
				continue
			}
			var stored, payload string
			if err := e.pool.QueryRow(ctx, "SELECT n.hostname, o.payload::text FROM nodes n JOIN outbox o ON o.subject = 'node/' || n.id WHERE n.id = $1 AND o.type = 'node.joined'",
				res.GetNodeId()).Scan(&stored, &payload); err != nil {
				t.Fatal(err)
			}
			var ev struct{ ID, Hostname string }
			if err := json.Unmarshal([]byte(payload), &ev); stored != h || err != nil || ev.Hostname != h || ev.ID != res.GetNodeId() {
				t.Errorf("hostname %q stored as %q, event %s (%v)", h, stored, payload, err)
			}
		}
	}
}

// TestHostileResultsKeepTheSession: a daemon whose handlers return hostile text (in output
// keys and values, in errors, a number JSON cannot hold) and a command whose stored type holds a
// control character: every command is recorded, as valid JSON, and the node keeps its one
// session throughout.
func TestHostileResultsKeepTheSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw1")
	hostileOutput := func(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
		p := c.GetEcho().GetData()
		s := hostile[int(p.GetFields()["i"].GetNumberValue())]
		out := &structpb.Struct{Fields: map[string]*structpb.Value{"stdout": structpb.NewStringValue(s), s: structpb.NewBoolValue(true)}}
		if p.GetFields()["nan"].GetBoolValue() {
			out.Fields["exitCode"] = structpb.NewNumberValue(math.NaN())
		}
		if p.GetFields()["fail"].GetBoolValue() {
			return out, errors.New(s)
		}
		return out, nil
	}
	f, err := daemon.JoinFake(ctx, e.bundle.RootPEM(), e.token(1, time.Now().Add(time.Hour)), "hostile", daemon.FakeOptions{
		Dialer: daemon.Dialer{Gateway: gw.addr}, Handlers: map[string]daemon.Handler{command.Echo: hostileOutput},
	})
	if err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	t.Cleanup(func() { cancel(); <-done })
	poll.Until(t, 10*time.Second, "the daemon connects", func() bool { return f.Status().Connected })
	node := f.Status().NodeID

	var ids []uuid.UUID
	for i := range hostile {
		for _, p := range []string{`{"data":{"i":%d}}`, `{"data":{"i":%d,"fail":true}}`, `{"data":{"i":%d,"nan":true}}`} {
			payload := strings.Replace(p, "%d", string(rune('0'+i)), 1)
			ids = append(ids, e.command(node, command.Echo, payload, uuid.NewString()))
		}
	}
	// Stored before types were checked: the gateway cannot send it and fails it.
	ids = append(ids, e.command(node, "ec\x01ho\"\\", `{}`, "control-type"))
	gw.Poke(uuid.MustParse(node))
	for _, id := range ids {
		poll.Until(t, 10*time.Second, "command "+id.String()+" finishes", func() bool {
			s, _ := e.commandState(id)
			return s == "succeeded" || s == "failed"
		})
	}
	if n := f.Status().Sessions; n != 1 {
		t.Errorf("the daemon opened %d sessions, want 1", n)
	}
	rows, err := e.pool.Query(ctx, "SELECT c.type, o.payload::text FROM commands c JOIN outbox o ON o.subject = 'command/' || c.id WHERE o.type IN ('command.succeeded', 'command.failed') AND c.node_id = $1", node)
	if err != nil {
		t.Fatal(err)
	}
	events := 0
	for rows.Next() {
		var typ, payload string
		if err := rows.Scan(&typ, &payload); err != nil {
			t.Fatal(err)
		}
		var ev struct{ Type, NodeID string }
		if err := json.Unmarshal([]byte(payload), &ev); err != nil || ev.Type != typ {
			t.Errorf("event %s for a command of type %q (%v)", payload, typ, err)
		}
		events++
	}
	if rows.Err() != nil || events != len(ids) {
		t.Errorf("%d result events for %d commands (%v)", events, len(ids), rows.Err())
	}
}

// TestHostileSessionMessages sends what a daemon not built on protobuf-go could: hellos, events
// and results with NULs, control characters and numbers JSON cannot hold. Each is stored
// scrubbed or dropped and the session goes on (it still receives a command); a message that
// does not decode (invalid UTF-8 in a string) ends it with InvalidArgument, never a silent drop.
func TestHostileSessionMessages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw1")
	c := e.joinNode(gw.addr)
	node := uuid.MustParse(c.id.NodeID)
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s := c.open(t, sctx)
	send := func(m *raw) {
		t.Helper()
		if err := s.Send(m); err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	var results []uuid.UUID
	for _, h := range hostile {
		if !utf8.ValidString(h) {
			continue // invalid UTF-8 does not decode; below
		}
		data := &structpb.Struct{Fields: map[string]*structpb.Value{h: structpb.NewStringValue(h), "n": structpb.NewNumberValue(math.Inf(1))}}
		send(encode(t, &daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Hello{Hello: &daemonv1.Hello{DaemonVersion: h, Inventory: &daemonv1.Inventory{
			Hostname: h, CpuModel: h, Gpus: []*daemonv1.Gpu{{Model: h, Uuid: h}}, Disks: []*daemonv1.Disk{{Name: h}},
		}}}}))
		send(encode(t, &daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Event{Event: &daemonv1.Event{Type: h, Data: data}}}))
		delete(data.Fields, "n")
		send(encode(t, &daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Event{Event: &daemonv1.Event{Type: "disk.full", Data: data}}}))
		for _, success := range []bool{true, false} {
			id := sentCommand(t, e.pool, e.tenant, node, command.Exec)
			results = append(results, id)
			send(encode(t, &daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Result{Result: &daemonv1.CommandResult{
				CommandId: id.String(), Success: success, Error: h, Result: data,
			}}}))
		}
	}
	// The session is still there: it delivers a new command.
	want := e.command(node.String(), command.Echo, `{}`, "after")
	gw.Poke(node)
	for {
		res, err := s.Receive()
		if err != nil {
			t.Fatalf("the session ended: %s", describe(err))
		}
		if res.GetCommand().GetId() == want.String() {
			break
		}
	}
	for _, id := range results {
		poll.Until(t, 10*time.Second, "command "+id.String()+" finishes", func() bool {
			st, _ := e.commandState(id)
			return st == "succeeded" || st == "failed"
		})
	}
	var stored int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE subject = $1 AND type = 'node.disk.full'", "node/"+node.String()).Scan(&stored); err != nil || stored == 0 {
		t.Errorf("%d scrubbed events stored (%v)", stored, err)
	}
	// Invalid UTF-8 does not decode: refused, and said so.
	id := sentCommand(t, e.pool, e.tenant, node, command.Exec)
	b := protowire.AppendTag(nil, 4, protowire.BytesType)
	b = protowire.AppendString(b, "\xff\xfe")
	send(resultFor(id, b))
	for {
		_, err := s.Receive()
		if err == nil {
			continue
		}
		if connect.CodeOf(err) != connect.CodeInvalidArgument || errors.Is(err, io.EOF) {
			t.Errorf("a message with invalid UTF-8 ended the session with %s, want invalid_argument", describe(err))
		}
		break
	}
}

// refusedNaming reports whether err is InvalidArgument with a message that starts with field.
func refusedNaming(err error, field string) bool {
	var cerr *connect.Error
	return errors.As(err, &cerr) && cerr.Code() == connect.CodeInvalidArgument && strings.HasPrefix(cerr.Message(), field)
}
