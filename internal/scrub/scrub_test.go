package scrub_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/scrub"
)

// hostile are strings a node or a handler may produce; scrubbed, each must encode.
var hostile = []string{"\x00", "a\x00b", "\x01\x1b[31m", "\u2028\u2029", "\xff\xfe", "ok\xc3", `"\`, strings.Repeat("\x00\xff", 1000)}

func TestString(t *testing.T) {
	t.Parallel()
	for _, s := range hostile {
		got := scrub.String(s)
		if !scrub.Clean(got) {
			t.Errorf("String(%q) = %q is not clean", s, got)
		}
	}
	for _, s := range []string{"", "plain", "\x01\x1b\u2028\"\\", "é"} {
		if got := scrub.String(s); got != s || !scrub.Clean(s) {
			t.Errorf("String(%q) = %q; clean text must pass unchanged", s, got)
		}
	}
	if got := scrub.String("a\x00b\xffc"); got != "a\uFFFDb\uFFFDc" {
		t.Errorf("String = %q", got)
	}
}

func TestMessage(t *testing.T) {
	t.Parallel()
	for _, s := range hostile {
		inner, _ := structpb.NewStruct(map[string]any{"k": "v"})
		inner.Fields[s] = structpb.NewStringValue(s)
		res := &daemonv1.CommandResult{CommandId: s, Error: s, Result: &structpb.Struct{Fields: map[string]*structpb.Value{
			s:        structpb.NewStringValue(s),
			"list":   structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{structpb.NewStringValue(s), structpb.NewNumberValue(1)}}),
			"nested": structpb.NewStructValue(inner),
		}}}
		hello := &daemonv1.Hello{DaemonVersion: s, Inventory: &daemonv1.Inventory{
			Hostname: s, Gpus: []*daemonv1.Gpu{{Model: s}}, Disks: []*daemonv1.Disk{{Name: s}},
		}}
		for _, m := range []proto.Message{res, hello} {
			if _, err := proto.Marshal(m); err == nil && protojsonClean(m) && scrub.Clean(s) {
				continue // nothing to do for this one
			}
			if !scrub.Message(m) {
				t.Errorf("%q: Message reported no change", s)
			}
			if _, err := proto.Marshal(m); err != nil {
				t.Errorf("%q: scrubbed message does not marshal: %v", s, err)
			}
			if !protojsonClean(m) {
				t.Errorf("%q: scrubbed message has a NUL in its JSON", s)
			}
			if scrub.Message(m) {
				t.Errorf("%q: a second scrub changed something", s)
			}
		}
	}
	if scrub.Message(nil) || scrub.Message((*daemonv1.Hello)(nil)) {
		t.Error("nil messages changed")
	}
}

func protojsonClean(m proto.Message) bool {
	b, err := protojson.Marshal(m)
	return err == nil && !strings.Contains(string(b), `\u0000`)
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"héllo", 2, "h"}, // é is two bytes: never cut in half
		{"héllo", 3, "hé"},
		{"€", 2, ""},
	} {
		if got := scrub.Truncate(c.s, c.n); got != c.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
