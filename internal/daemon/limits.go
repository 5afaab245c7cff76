package daemon

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// gatewayLimits are the per-kind message limits the session's gateway announced in its
// Welcome; a zero field is a limit the gateway did not announce (an older gateway), which the
// daemon does not enforce. The gateway ends a session that sends more, so the daemon keeps
// within them.
type gatewayLimits struct {
	resultBytes, eventBytes int
}

// limitsOf reads the limits a Welcome announces.
func limitsOf(w *daemonv1.Welcome) gatewayLimits {
	return gatewayLimits{resultBytes: int(max(w.GetMaxResultBytes(), 0)), eventBytes: int(max(w.GetMaxEventBytes(), 0))}
}

// capResult returns r when it fits in limit bytes (or limit is 0, unknown), and otherwise a
// failed result for the same command that says why: sending r would end the session, and the
// daemon would resend it after every reconnect. The bool reports whether r was replaced.
func capResult(r *daemonv1.CommandResult, limit int) (*daemonv1.CommandResult, bool) {
	size := proto.Size(r)
	if limit <= 0 || size <= limit {
		return r, false
	}
	return &daemonv1.CommandResult{
		CommandId: r.GetCommandId(),
		Error:     fmt.Sprintf("result of %d bytes is over the gateway's limit of %d (limits.daemonResultBytes)", size, limit),
	}, true
}

// eventFits reports whether e fits in limit bytes (or limit is 0, unknown).
func eventFits(e *daemonv1.Event, limit int) bool {
	return limit <= 0 || proto.Size(e) <= limit
}
