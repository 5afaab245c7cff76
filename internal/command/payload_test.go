package command_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
)

// TestOneofsMatchTypes keeps the proto oneofs and the Go list of types in step: every message
// that carries a payload has exactly one case per known type, named for it.
func TestOneofsMatchTypes(t *testing.T) {
	t.Parallel()
	for _, m := range []proto.Message{&daemonv1.Command{}, &commandsv1.CreateRequest{}, &commandsv1.Command{}} {
		od := m.ProtoReflect().Descriptor().Oneofs().ByName("payload")
		if od == nil {
			t.Fatalf("%T has no payload oneof", m)
		}
		var names []string
		for i := range od.Fields().Len() {
			fd := od.Fields().Get(i)
			names = append(names, fd.JSONName())
			p := m.ProtoReflect().NewField(fd).Message().Interface()
			if got := command.TypeOf(p); got != fd.JSONName() {
				t.Errorf("%T.%s carries %T, whose type is %q", m, fd.Name(), p, got)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, command.Types()) {
			t.Errorf("%T's payload cases are %v, the types %v", m, names, command.Types())
		}
	}
}

func TestSetPayloadRoundTrip(t *testing.T) {
	t.Parallel()
	exec := &daemonv1.ExecPayload{Path: "/usr/bin/nvidia-smi", Args: []string{"-L"}}
	for _, m := range []proto.Message{&daemonv1.Command{}, &commandsv1.CreateRequest{}, &commandsv1.Command{}} {
		if typ, p := command.PayloadOf(m); typ != "" || p != nil {
			t.Errorf("empty %T has payload %q", m, typ)
		}
		if err := command.SetPayload(m, exec); err != nil {
			t.Fatal(err)
		}
		typ, p := command.PayloadOf(m)
		if typ != command.Exec || !proto.Equal(p, exec) {
			t.Errorf("%T: got %q %v", m, typ, p)
		}
	}
	if err := command.SetPayload(&daemonv1.Command{}, &daemonv1.Hello{}); err == nil {
		t.Error("a Hello was set as a payload")
	}
	b, err := command.Encode(exec)
	if err != nil {
		t.Fatal(err)
	}
	back, err := command.Decode(command.Exec, b)
	if err != nil || !proto.Equal(back, exec) {
		t.Errorf("decode %s: %v %v", b, back, err)
	}
	if _, err := command.Decode("sleep", b); err == nil {
		t.Error("decoded an unknown type")
	}
	if p, err := command.Decode(command.Exec, []byte(`{"path":"/bin/true","argv":["x"]}`)); err != nil || p.(*daemonv1.ExecPayload).GetPath() != "/bin/true" {
		t.Errorf("a row with an unknown field: %v %v", p, err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	big, _ := structpb.NewStruct(map[string]any{"x": strings.Repeat("a", command.MaxStructBytes)})
	ptr := func(f float64) *float64 { return &f }
	for _, c := range []struct {
		p     proto.Message
		field string // "" when valid
	}{
		{&daemonv1.ExecPayload{Path: "/usr/bin/nvidia-smi", Args: []string{"-L"}}, ""},
		{&daemonv1.ExecPayload{}, "path"},
		{&daemonv1.ExecPayload{Path: "nvidia-smi"}, "path"},
		{&daemonv1.ExecPayload{Path: "/usr/bin/../bin/x"}, "path"},
		{&daemonv1.ExecPayload{Path: "/bin/x", Args: []string{"ok", "a\x00b"}}, "args[1]"},
		{&daemonv1.ExecPayload{Path: "/bin/x", Args: make([]string, command.MaxExecArgs)}, "args"},
		{&daemonv1.ExecPayload{Path: "/bin/x", Dir: "tmp"}, "dir"},
		{&daemonv1.ExecPayload{Path: "/bin/x", TimeoutSeconds: ptr(0)}, "timeout_seconds"},
		{&daemonv1.UpgradePayload{Version: "v1.2.3"}, ""},
		{&daemonv1.UpgradePayload{Version: "v1.3.0-rc.1+build.7"}, ""},
		{&daemonv1.UpgradePayload{}, "version"},
		{&daemonv1.UpgradePayload{Version: "v 1"}, "version"},
		{&daemonv1.UpgradePayload{Version: "../v1"}, "version"},
		{&daemonv1.UpgradePayload{Version: strings.Repeat("v", 65)}, "version"},
		{&daemonv1.ConfigurePayload{}, "config"},
		{&daemonv1.ConfigurePayload{Config: &structpb.Struct{}}, ""},
		{&daemonv1.ConfigurePayload{Config: big}, "config"},
		{&daemonv1.EchoPayload{Data: big}, "data"},
		{&daemonv1.EchoPayload{}, ""},
		{&daemonv1.DrainPayload{}, ""},
		{&daemonv1.CollectInventoryPayload{}, ""},
	} {
		err := command.Validate(c.p)
		var fe *command.FieldError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%T %v: %v", c.p, c.p, err)
		case c.field != "" && (!errors.As(err, &fe) || fe.Field != c.field):
			t.Errorf("%T %v: got %v, want an error naming %s", c.p, c.p, err, c.field)
		}
	}
}
