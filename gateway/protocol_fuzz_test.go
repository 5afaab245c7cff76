package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
)

// FuzzJoin sends Join requests with arbitrary CSRs and hostnames (and, when token is not empty,
// an arbitrary token) through a real gateway. Whatever the input: no panic, no Internal or
// Unknown code; a join that succeeds stored the hostname as sent, clean, with a node.joined event
// that is valid JSON. The seeds run under plain `go test`; `go test -fuzz FuzzJoin ./gateway`
// explores.
func FuzzJoin(f *testing.F) {
	e := gatewaytest.New(f)
	gw := e.StartGateway("gw-fuzz", nil)
	valid := e.Token(math.MaxInt32, time.Now().Add(24*time.Hour))
	c := newRawNode(f, gw.Addr, e.Bundle.RootPEM(), nil)

	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	other, _ := url.Parse("spiffe://" + gatewaytest.TrustDomain + "/node/" + uuid.NewString())
	plain, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, ecKey)
	named, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "\x01evil"}, DNSNames: []string{"a.example"}}, ecKey)
	claims, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{other}}, ecKey)
	ed, _ := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, edKey)
	for _, csr := range [][]byte{plain, named, claims, ed, nil, []byte("not DER"), plain[:len(plain)/2]} {
		for _, h := range []string{"host-1", "", "\x00", "a\x01b", "\u2028", `"\`, "\xff\xfe", strings.Repeat("h", 254)} {
			f.Add("", csr, []byte(h))
		}
	}
	f.Add("bcj_nope", plain, []byte("h"))
	f.Add("bcj_"+strings.Repeat("a", 5000), plain, []byte("h"))

	f.Fuzz(func(t *testing.T, token string, csr, hostname []byte) {
		if token == "" {
			token = valid
		}
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		b = protowire.AppendString(b, token)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, csr)
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, hostname)
		r := raw(b)
		res, err := c.join.CallUnary(ctx, connect.NewRequest(&r))
		if badCode(err) {
			t.Fatalf("Join(csr %x, hostname %q): %s", csr, hostname, describe(err))
		}
		if err != nil {
			return
		}
		h := string(hostname)
		if !utf8.ValidString(h) || strings.ContainsFunc(h, unicode.IsControl) || len(h) > 253 {
			t.Fatalf("Join accepted hostname %q", h)
		}
		var stored, payload string
		if err := e.Pool.QueryRow(ctx, "SELECT n.hostname, o.payload::text FROM nodes n JOIN outbox o ON o.subject = 'node/' || n.id WHERE n.id = $1 AND o.type = 'node.joined'",
			res.Msg.GetNodeId()).Scan(&stored, &payload); err != nil {
			t.Fatal(err)
		}
		var ev struct{ Hostname string }
		if err := json.Unmarshal([]byte(payload), &ev); err != nil || stored != h || ev.Hostname != h {
			t.Fatalf("hostname %q stored as %q, event %s (%v)", h, stored, payload, err)
		}
	})
}

// FuzzSessionMessage opens a session with a plain hello, then sends one arbitrary message: a whole
// SessionRequest, or the body of a hello, heartbeat, ack, result (for a command sent to the node)
// or event. Whatever it holds: no panic, and the session ends (once the daemon closes its side)
// cleanly or with InvalidArgument or ResourceExhausted, never Internal or Unknown; a result that
// decodes always finishes its command, so the daemon never resends it in a loop. The seeds run
// under plain `go test`; `go test -fuzz FuzzSessionMessage ./gateway` explores.
func FuzzSessionMessage(f *testing.F) {
	e := gatewaytest.New(f)
	gw := e.StartGateway("gw-fuzz", nil)
	id, err := daemon.Dialer{Gateway: gw.Addr}.Join(ctx, e.Bundle.RootPEM(), e.Token(1, time.Now().Add(time.Hour)), "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	c := newRawNode(f, gw.Addr, e.Bundle.RootPEM(), id)
	node := uuid.MustParse(id.NodeID)

	add := func(field protowire.Number, m proto.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(field), b)
	}
	for _, s := range []string{"", "\x00", "a\x01b\x1b", "\u2028", `"\`, strings.Repeat("\x00x", 3000)} {
		data := &structpb.Struct{Fields: map[string]*structpb.Value{s: structpb.NewStringValue(s), "nan": structpb.NewNumberValue(math.NaN())}}
		add(fieldHello, &daemonv1.Hello{DaemonVersion: s, Inventory: &daemonv1.Inventory{Hostname: s, Cpus: -1, MemoryBytes: math.MinInt64,
			Gpus: []*daemonv1.Gpu{{Model: s, Uuid: s, Index: -5}, {Uuid: s}}, Nics: []*daemonv1.Nic{{Mac: s}}}, Time: &timestamppb.Timestamp{Seconds: math.MaxInt64}})
		add(fieldResult, &daemonv1.CommandResult{Success: true, Error: s, Result: data})
		add(fieldResult, &daemonv1.CommandResult{Error: s})
		add(fieldEvent, &daemonv1.Event{Type: s, Data: data})
		add(fieldEvent, &daemonv1.Event{Type: "disk.full", Data: &structpb.Struct{Fields: map[string]*structpb.Value{"k": structpb.NewStringValue(s)}}})
		add(3, &daemonv1.CommandAck{CommandId: s})
		add(0, &daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Ack{Ack: &daemonv1.CommandAck{CommandId: uuid.NewString()}}})
	}
	add(2, &daemonv1.Heartbeat{Time: &timestamppb.Timestamp{Seconds: -1 << 62, Nanos: -1}})
	f.Add(uint8(fieldResult), []byte("\x22\x02\xff\xfe"))   // error: invalid UTF-8
	f.Add(uint8(fieldEvent), []byte("\x0a\x02\xc3\x28"))    // type: invalid UTF-8
	f.Add(uint8(0), []byte("\xff\xff\xff\xff\xff\xff\x01")) // not protobuf
	f.Add(uint8(9), []byte{})

	f.Fuzz(func(t *testing.T, field uint8, body []byte) {
		var cmd uuid.UUID
		var msg *raw
		switch n := protowire.Number(field % 6); n {
		case 0:
			r := raw(body)
			msg = &r
		case fieldResult:
			cmd = sentCommand(t, e.Pool, e.Tenant, node, "exec")
			msg = resultFor(cmd, body)
		default:
			msg = oneof(n, body)
		}
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		s := c.open(t, sctx)
		if err := s.Send(msg); err != nil {
			t.Fatalf("send: %v", err)
		}
		_ = s.CloseRequest()
		var end error
		for end == nil {
			_, end = s.Receive()
		}
		if badCode(end) {
			t.Fatalf("message %d %x ended the session with %s", field%6, body, describe(end))
		}
		var decoded daemonv1.SessionRequest
		if proto.Unmarshal(*msg, &decoded) != nil || connect.CodeOf(end) == connect.CodeResourceExhausted {
			return // refused at the edge, and said so
		}
		if !errors.Is(end, io.EOF) {
			t.Fatalf("message %d %x decodes but ended the session with %s", field%6, body, describe(end))
		}
		if cmd == uuid.Nil || decoded.GetResult().GetCommandId() != cmd.String() {
			return // not a result, or its body swallowed the command id
		}
		// The gateway writes results in batches, a few milliseconds after it read them.
		poll.Until(t, 10*time.Second, fmt.Sprintf("a result that decodes finishes its command (%x)", body), func() bool {
			st := commandState(t, e, cmd)
			return st == "succeeded" || st == "failed"
		})
	})
}

// commandState is the state of command id.
func commandState(t *testing.T, e *gatewaytest.Env, id uuid.UUID) string {
	t.Helper()
	var state string
	if err := e.Pool.QueryRow(ctx, "SELECT state FROM commands WHERE id = $1", id).Scan(&state); err != nil {
		t.Fatal(err)
	}
	return state
}
