package cli

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
)

func TestFanOutLines(t *testing.T) {
	t.Parallel()
	c := &commandsv1.FanOutCounts{Pending: 551, Sent: 30, Acked: 7, Succeeded: 409, Failed: 3}
	if got, want := fanOutLine(c, 1000, 4200*time.Millisecond), "[########------------] 412/1000 · 37 in flight · 551 pending · 3 failed · 4s"; got != want {
		t.Errorf("progress line\n got %q\nwant %q", got, want)
	}
	res, _ := structpb.NewStruct(map[string]any{"exitCode": 0, "stdout": "GPU 0: NVIDIA H100\nGPU 1: NVIDIA H100\n"})
	cmd := &commandsv1.Command{NodeId: "n1", State: commandsv1.CommandState_COMMAND_STATE_SUCCEEDED, Result: res}
	if got, want := resultLine(cmd), "node n1  succeeded  exit 0  GPU 0: NVIDIA H100 GPU 1: NVIDIA H100"; got != want {
		t.Errorf("result line\n got %q\nwant %q", got, want)
	}
	expired := &commandsv1.Command{NodeId: "n2", State: commandsv1.CommandState_COMMAND_STATE_EXPIRED, Error: "deadline passed while the command was pending"}
	if got, want := resultLine(expired), "node n2  expired    deadline passed while the command was pending"; got != want {
		t.Errorf("expired line\n got %q\nwant %q", got, want)
	}
	done := &commandsv1.GetFanOutResponse{FanOut: &commandsv1.FanOut{Id: "f", Total: 2}, Counts: &commandsv1.FanOutCounts{Succeeded: 2}}
	if err := fanOutOutcome(done); err != nil {
		t.Errorf("all succeeded: %v", err)
	}
	done.Counts.Succeeded, done.Counts.Failed = 1, 1
	if err := fanOutOutcome(done); ExitCode(err) != ExitOther {
		t.Errorf("one failed: %v (exit %d)", err, ExitCode(err))
	}
}
