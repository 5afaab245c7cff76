package pools

import (
	"encoding/json"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/idle"
)

// idleActions maps the API's actions to the stored ones.
var idleActions = map[poolsv1.IdleAction]string{
	poolsv1.IdleAction_IDLE_ACTION_NOTIFY:  idle.ActionNotify,
	poolsv1.IdleAction_IDLE_ACTION_RELEASE: idle.ActionRelease,
	poolsv1.IdleAction_IDLE_ACTION_LEND:    idle.ActionLend,
}

// idlePolicy checks a request's idle policy and encodes it for pools.idle_policy; unset is none
// ("{}"). Its errors name the field (idle_policy.window).
func idlePolicy(p *poolsv1.IdlePolicy) ([]byte, error) {
	if p == nil {
		return []byte("{}"), nil
	}
	const field = "idle_policy"
	out := idle.Policy{
		MinUtilization: p.GetMinUtilization(), Action: idleActions[p.GetAction()],
		AllowOptOut: p.GetAllowOptOut(), TunnelCountsAsUse: p.GetTunnelCountsAsUse(),
	}
	for name, d := range map[string]*durationpb.Duration{"window": p.GetWindow(), "grace": p.GetGrace()} {
		if d == nil {
			continue
		}
		if err := d.CheckValid(); err != nil {
			return nil, apierr.InvalidArgument(field+"."+name, "%v", err)
		}
	}
	out.WindowMs, out.GraceMs = p.GetWindow().AsDuration().Milliseconds(), p.GetGrace().AsDuration().Milliseconds()
	if f, err := out.Check(); err != nil {
		return nil, apierr.InvalidArgument(field+"."+f, "%v", err)
	}
	return json.Marshal(out)
}

// idlePolicyToProto is a stored idle policy; nil for none.
func idlePolicyToProto(b []byte) *poolsv1.IdlePolicy {
	p, err := idle.Decode(b)
	if err != nil || p.IsZero() {
		return nil
	}
	out := &poolsv1.IdlePolicy{
		MinUtilization: p.MinUtilization, Window: durationpb.New(p.Window()), Grace: durationpb.New(time.Duration(p.GraceMs) * time.Millisecond),
		AllowOptOut: p.AllowOptOut, TunnelCountsAsUse: p.TunnelCountsAsUse,
	}
	for a, s := range idleActions {
		if s == p.Action {
			out.Action = a
		}
	}
	return out
}
