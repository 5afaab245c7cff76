package daemon

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// TestCapResult: a result over the gateway's announced limit becomes a failure for the same
// command that names both sizes and the limit's key; one within it, or any result when the
// gateway announced no limit (an older gateway), is sent as it is.
func TestCapResult(t *testing.T) {
	t.Parallel()
	out, err := structpb.NewStruct(map[string]any{"output": strings.Repeat("x", 2000)})
	if err != nil {
		t.Fatal(err)
	}
	r := &daemonv1.CommandResult{CommandId: "c1", Success: true, Result: out}
	size := proto.Size(r)
	for _, tc := range []struct {
		name  string
		limit int
		over  bool
	}{
		{"no limit announced", 0, false},
		{"exactly the limit", size, false},
		{"one byte over", size - 1, true},
		{"far over", 1024, true},
	} {
		got, over := capResult(r, tc.limit)
		if over != tc.over {
			t.Errorf("%s: replaced %v, want %v", tc.name, over, tc.over)
		}
		if !tc.over {
			if got != r {
				t.Errorf("%s: got %v, want the result unchanged", tc.name, got)
			}
			continue
		}
		want := fmt.Sprintf("result of %d bytes is over the gateway's limit of %d (limits.daemonResultBytes)", size, tc.limit)
		if got.GetCommandId() != "c1" || got.GetSuccess() || got.GetResult() != nil || got.GetError() != want {
			t.Errorf("%s: got %v, want a failure for c1 saying %q", tc.name, got, want)
		}
		if proto.Size(got) > tc.limit {
			t.Errorf("%s: the failure is %d bytes, over the limit of %d", tc.name, proto.Size(got), tc.limit)
		}
	}
}

// TestEventFits: an event over the announced limit does not fit; with no limit announced,
// every event does.
func TestEventFits(t *testing.T) {
	t.Parallel()
	data, err := structpb.NewStruct(map[string]any{"blob": strings.Repeat("x", 2000)})
	if err != nil {
		t.Fatal(err)
	}
	e := &daemonv1.Event{Type: "disk.full", Data: data}
	size := proto.Size(e)
	for _, tc := range []struct {
		limit int
		want  bool
	}{{0, true}, {size, true}, {size - 1, false}} {
		if got := eventFits(e, tc.limit); got != tc.want {
			t.Errorf("event of %d bytes, limit %d: fits %v, want %v", size, tc.limit, got, tc.want)
		}
	}
}

// TestLimitsOf: a welcome's limits are read as announced, and a negative one as none.
func TestLimitsOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		w    *daemonv1.Welcome
		want gatewayLimits
	}{
		{&daemonv1.Welcome{}, gatewayLimits{}},
		{&daemonv1.Welcome{MaxResultBytes: 4096, MaxEventBytes: 1024}, gatewayLimits{resultBytes: 4096, eventBytes: 1024}},
		{&daemonv1.Welcome{MaxResultBytes: -1, MaxEventBytes: -1}, gatewayLimits{}},
	} {
		if got := limitsOf(tc.w); got != tc.want {
			t.Errorf("limitsOf(%v) = %+v, want %+v", tc.w, got, tc.want)
		}
	}
}
