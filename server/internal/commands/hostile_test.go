package commands_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"io"
	"net/http"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	cmdtype "github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/server/servertest"
)

// hostile are strings a caller controls that have broken JSON built by format strings, or the
// database: control characters, a line separator, quotes and backslashes, and a long string.
// (Invalid UTF-8 cannot travel in a protobuf string; server/hostile_test.go sends it raw.)
var hostile = []string{"\x00", "a\x00b", "\x01", "\x1b[2J", "\u2028", `"\`, `\u0000`, strings.Repeat("x\"\\", 2000)}

// TestCreateRefusesUnknownTypes: a command is one case of the payload oneof, named exactly as
// package command's types; none, an unknown field (JSON) or an unknown case (binary, where it
// arrives as an unknown field) is InvalidArgument naming the field and creates nothing.
func TestCreateRefusesUnknownTypes(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	n := node(t, env, tenantOf(t, env, env.AdminKey))
	if _, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String()}); !refusedNaming(err, "payload") {
		t.Errorf("no payload: %v, want invalid_argument naming payload", err)
	}
	// A case this server does not know (field 99, as a newer client might send).
	unknown := &commandsv1.CreateRequest{NodeId: n.String()}
	unknown.ProtoReflect().SetUnknown(protowire.AppendTag(nil, 99, protowire.BytesType))
	unknown.ProtoReflect().SetUnknown(protowire.AppendBytes(unknown.ProtoReflect().GetUnknown(), nil))
	if _, err := c.Create(ctx, unknown); !refusedNaming(err, "payload") {
		t.Errorf("unknown case: %v, want invalid_argument naming payload", err)
	}
	for _, typ := range append([]string{"nope", "Exec", "type", "payload", "sleep", "collect_inventory_"}, hostile...) {
		body, _ := json.Marshal(map[string]any{"nodeId": n.String(), typ: map[string]any{}})
		hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, env.URL+"/commands/create", strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("X-Better-Compute", "1")
		hreq.Header.Set("Authorization", "Bearer "+env.AdminKey)
		res, err := http.DefaultClient.Do(hreq)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "invalid_argument") {
			t.Errorf("JSON with %.20q: status %d: %s", typ, res.StatusCode, msg)
		}
	}
	for _, typ := range cmdtype.Types() {
		req := &commandsv1.CreateRequest{NodeId: n.String()}
		p, err := cmdtype.Decode(typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		switch p := p.(type) {
		case *daemonv1.ExecPayload:
			p.Path = "/bin/true"
		case *daemonv1.UpgradePayload:
			p.Version = "v1.2.3"
		case *daemonv1.ConfigurePayload:
			p.Config = &structpb.Struct{}
		case *daemonv1.GpuResetPayload:
			p.Uuid = "GPU-8f6e9a2c-1d3b-4c5e-9f7a-0b1c2d3e4f50"
		}
		if err := cmdtype.SetPayload(req, p); err != nil {
			t.Fatal(err)
		}
		res, err := c.Create(ctx, req)
		if err != nil {
			t.Errorf("known type %q: %v", typ, err)
			continue
		}
		if got, _ := cmdtype.PayloadOf(res.GetCommands()[0]); got != typ || res.GetCommands()[0].GetType() != typ {
			t.Errorf("known type %q came back as %q (type %q)", typ, got, res.GetCommands()[0].GetType())
		}
	}
	list, err := c.List(ctx, &commandsv1.ListRequest{})
	if err != nil || len(list.GetCommands()) != len(cmdtype.Types()) {
		t.Fatalf("%d commands (%v), want one per known type", len(list.GetCommands()), err)
	}
}

// TestCreateHostileArgs: hostile strings in a command's payload, as arguments and as keys and
// values of an echo's data, are either refused naming the field (a NUL, which PostgreSQL cannot
// store) or stored and read back exactly, with valid JSON in the command and in its
// command.created event.
func TestCreateHostileArgs(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	n := node(t, env, tenantOf(t, env, env.AdminKey))
	for i, s := range hostile {
		exec := &daemonv1.ExecPayload{Path: "/bin/echo", Args: []string{s}}
		data := &structpb.Struct{Fields: map[string]*structpb.Value{"arg": structpb.NewStringValue(s), s: structpb.NewStringValue("key")}}
		reqs := []*commandsv1.CreateRequest{
			{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Exec{Exec: exec}, IdempotencyKey: "exec" + strings.Repeat("k", i+1)},
			{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{Data: data}}, IdempotencyKey: "echo" + strings.Repeat("k", i+1)},
		}
		for j, req := range reqs {
			field := []string{"exec.args", "echo.data"}[j]
			res, err := c.Create(ctx, req)
			if strings.Contains(s, "\x00") {
				if !refusedNaming(err, field) {
					t.Errorf("payload with %.20q: %v, want invalid_argument naming %s", s, err, field)
				}
				continue
			}
			if err != nil {
				t.Errorf("payload with %.20q: %v", s, err)
				continue
			}
			got, err := c.Get(ctx, &commandsv1.GetRequest{Id: res.GetCommands()[0].GetId()})
			if err != nil {
				t.Fatal(err)
			}
			_, want := cmdtype.PayloadOf(req)
			if _, p := cmdtype.PayloadOf(got.GetCommand()); !proto.Equal(p, want) {
				t.Errorf("payload with %.20q read back as %.60v", s, p)
			}
			if b, err := protojson.Marshal(got); err != nil || !json.Valid(b) {
				t.Errorf("payload with %.20q: the command is not valid JSON: %v", s, err)
			}
		}
	}
	var bad int
	if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE type = 'command.created' AND payload->>'type' NOT IN ('exec', 'echo')").Scan(&bad); err != nil || bad != 0 {
		t.Errorf("%d command.created events with another type (%v)", bad, err)
	}
}

// refusedNaming reports whether err is InvalidArgument with a message that starts with field.
func refusedNaming(err error, field string) bool {
	var cerr *connect.Error
	return errors.As(err, &cerr) && cerr.Code() == connect.CodeInvalidArgument && strings.HasPrefix(cerr.Message(), field)
}
