package gateway_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
)

// raw is a protobuf message already encoded: what a daemon that is not built on protobuf-go
// could send, invalid UTF-8 and all (protobuf-go refuses to encode it).
type raw []byte

// rawCodec sends raw messages as they are and decodes answers as protobuf.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*raw); ok {
		return *r, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (rawCodec) Unmarshal(b []byte, v any) error { return proto.Unmarshal(b, v.(proto.Message)) }

// encode is m as raw protobuf.
func encode(t testing.TB, m proto.Message) *raw {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	r := raw(b)
	return &r
}

// oneof wraps body as field num of a SessionRequest (1 hello, 2 heartbeat, 3 ack, 4 result,
// 5 event) without looking inside it.
func oneof(num protowire.Number, body []byte) *raw {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	r := raw(protowire.AppendBytes(b, body))
	return &r
}

// Session message fields, as numbered in daemon.proto.
const (
	fieldHello  protowire.Number = 1
	fieldResult protowire.Number = 4
	fieldEvent  protowire.Number = 5
)

// rawNode is a client with a node's certificate that sends raw messages.
type rawNode struct {
	session *connect.Client[raw, daemonv1.SessionResponse]
	join    *connect.Client[raw, daemonv1.JoinResponse]
	id      *daemon.Identity
}

// joinNode joins a node through addr with a fresh token and returns a raw client for it.
func (e *env) joinNode(addr string) *rawNode {
	e.t.Helper()
	id, err := daemon.Dialer{Gateway: addr}.Join(ctx, e.bundle.RootPEM(), e.token(1, time.Now().Add(time.Hour)), "raw")
	if err != nil {
		e.t.Fatal(err)
	}
	return newRawNode(e.t, addr, e.bundle.RootPEM(), id)
}

// newRawNode is a raw client for addr presenting id (nil: no certificate, for Join).
func newRawNode(t testing.TB, addr string, rootPEM []byte, id *daemon.Identity) *rawNode {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(rootPEM)
	cfg := &tls.Config{RootCAs: roots, NextProtos: []string{"h2"}}
	if id != nil {
		cert, err := id.Certificate()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	opts := []connect.ClientOption{connect.WithGRPC(), connect.WithCodec(rawCodec{})}
	return &rawNode{
		session: connect.NewClient[raw, daemonv1.SessionResponse](hc, "https://"+addr+daemonv1connect.DaemonServiceSessionProcedure, opts...),
		join:    connect.NewClient[raw, daemonv1.JoinResponse](hc, "https://"+addr+daemonv1connect.DaemonServiceJoinProcedure, opts...),
		id:      id,
	}
}

// open starts a session with a plain hello and waits for the welcome.
func (c *rawNode) open(t testing.TB, ctx context.Context) *connect.BidiStreamForClient[raw, daemonv1.SessionResponse] {
	t.Helper()
	s := c.session.CallBidiStream(ctx)
	if err := s.Send(encode(t, &daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Hello{Hello: &daemonv1.Hello{DaemonVersion: "raw"}}})); err != nil {
		t.Fatalf("send hello: %v", err)
	}
	if res, err := s.Receive(); err != nil || res.GetWelcome() == nil {
		t.Fatalf("want a welcome, got %v, %v", res, err)
	}
	return s
}

// sentCommand creates a command for node already sent to it, so that a result finishes it.
func sentCommand(t testing.TB, pool db.DBTX, tenant, node uuid.UUID, typ string) uuid.UUID {
	t.Helper()
	q := db.New(pool)
	id := uuid.Must(uuid.NewV7())
	if _, err := q.CreateCommand(ctx, db.CreateCommandParams{
		ID: id, TenantID: tenant, NodeID: node, Type: typ, Payload: []byte(`{}`),
		IdempotencyKey: id.String(), Deadline: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.MarkCommandsSent(ctx, db.MarkCommandsSentParams{NodeID: node, Ids: []uuid.UUID{id}}); err != nil {
		t.Fatal(err)
	}
	return id
}

// resultFor is a raw result message with body, its command_id forced to id (a field repeated
// later in the encoding wins).
func resultFor(id uuid.UUID, body []byte) *raw {
	b := append([]byte(nil), body...)
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, id.String())
	return oneof(fieldResult, b)
}

// badCodes are the codes no input may produce.
func badCode(err error) bool {
	if err == nil || errors.Is(err, io.EOF) {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeInternal, connect.CodeUnknown, connect.CodeDataLoss, connect.CodeUnimplemented:
		return true
	}
	return false
}

func describe(err error) string { return fmt.Sprintf("%v (code %v)", err, connect.CodeOf(err)) }
