package commands_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	cmdtype "github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/server/servertest"
)

// hostile are strings a caller controls that have broken JSON built by format strings, or the
// database: control characters, a line separator, quotes and backslashes, and a long string.
// (Invalid UTF-8 cannot travel in a protobuf string; server/hostile_test.go sends it raw.)
var hostile = []string{"\x00", "a\x00b", "\x01", "\x1b[2J", "\u2028", `"\`, `\u0000`, strings.Repeat("x\"\\", 2000)}

// TestCreateRefusesUnknownTypes: a command type is one of package command's, byte for byte;
// anything else, hostile or merely unknown, is InvalidArgument naming type and creates nothing.
func TestCreateRefusesUnknownTypes(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	n := node(t, env, tenantOf(t, env, env.AdminKey))
	for _, typ := range append([]string{"", "nope", "Exec", " echo", "echo ", "echo\n", "ec\x00ho", "sleep"}, hostile...) {
		_, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String(), Type: typ})
		if !refusedNaming(err, "type") {
			t.Errorf("type %.20q: %v, want invalid_argument naming type", typ, err)
		}
	}
	for _, typ := range cmdtype.Types() {
		if _, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String(), Type: typ}); err != nil {
			t.Errorf("known type %q: %v", typ, err)
		}
	}
	list, err := c.List(ctx, &commandsv1.ListRequest{})
	if err != nil || len(list.GetCommands()) != len(cmdtype.Types()) {
		t.Fatalf("%d commands (%v), want one per known type", len(list.GetCommands()), err)
	}
}

// TestCreateHostileArgs: hostile strings in a command's payload, as keys and values, are either
// refused naming the payload (a NUL, which PostgreSQL cannot store) or stored and read back
// exactly, with valid JSON in the command and in its command.created event.
func TestCreateHostileArgs(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	n := node(t, env, tenantOf(t, env, env.AdminKey))
	for i, s := range hostile {
		payload := &structpb.Struct{Fields: map[string]*structpb.Value{
			"argv": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue("/bin/echo"), structpb.NewStringValue(s)}}),
			s:      structpb.NewStringValue("key"),
		}}
		res, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String(), Type: cmdtype.Exec, Payload: payload, IdempotencyKey: strings.Repeat("k", i+1)})
		if strings.Contains(s, "\x00") {
			if !refusedNaming(err, "payload") {
				t.Errorf("payload with %.20q: %v, want invalid_argument naming payload", s, err)
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
		if p := got.GetCommand().GetPayload(); p.GetFields()["argv"].GetListValue().GetValues()[1].GetStringValue() != s || p.GetFields()[s].GetStringValue() != "key" {
			t.Errorf("payload with %.20q read back as %.60v", s, p)
		}
		if b, err := protojson.Marshal(got); err != nil || !json.Valid(b) {
			t.Errorf("payload with %.20q: the command is not valid JSON: %v", s, err)
		}
	}
	var bad int
	if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE type = 'command.created' AND payload->>'type' <> 'exec'").Scan(&bad); err != nil || bad != 0 {
		t.Errorf("%d command.created events with another type (%v)", bad, err)
	}
}

// refusedNaming reports whether err is InvalidArgument with a message that starts with field.
func refusedNaming(err error, field string) bool {
	var cerr *connect.Error
	return errors.As(err, &cerr) && cerr.Code() == connect.CodeInvalidArgument && strings.HasPrefix(cerr.Message(), field)
}
