package pools

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/gen/db"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

const healthPolicyField = "gpu_health_policy"

// healthPolicy reads and checks a pool's GPU health policy override and encodes it for
// pools.gpu_health_policy; an unset one is the zero override ("{}"). Its errors are
// InvalidArgument naming the field (gpu_health_policy.rules[2].effect).
func healthPolicy(p *poolsv1.GpuHealthPolicy) ([]byte, error) {
	if n := len(p.GetRules()); n > gpuhealth.MaxOverrideRules {
		// Refused before the rules are read.
		return nil, apierr.InvalidArgument(healthPolicyField+".rules", "at most %d rules, got %d", gpuhealth.MaxOverrideRules, n)
	}
	action, ok := gpuhealth.LeaseActionFromProto(p.GetOnUnhealthyLease())
	if !ok {
		return nil, apierr.InvalidArgument(healthPolicyField+".on_unhealthy_lease", "unknown action %d", p.GetOnUnhealthyLease())
	}
	o := gpuhealth.Override{OnUnhealthyLease: action}
	for i, r := range p.GetRules() {
		var window time.Duration
		if w := r.GetWindow(); w != nil {
			if err := w.CheckValid(); err != nil {
				return nil, apierr.InvalidArgument(fmt.Sprintf("%s.rules[%d].window", healthPolicyField, i), "%v", err)
			}
			window = w.AsDuration()
		}
		o.Rules = append(o.Rules, gpuhealth.Rule{
			Check: r.GetCheck(), Codes: r.GetCodes(), MinCount: r.GetMinCount(), Effect: gpuhealth.Effect(r.GetEffect()),
			Window: gpuhealth.Duration(window),
		})
	}
	if field, problem := o.Check(); field != "" {
		return nil, apierr.InvalidArgument(healthPolicyField+"."+field, "%s", problem)
	}
	return gpuhealth.EncodeOverride(o)
}

// healthPolicyToProto is a pool's stored override in its API form; nil when it overrides
// nothing.
func healthPolicyToProto(b []byte) (*poolsv1.GpuHealthPolicy, error) {
	o, err := gpuhealth.DecodeOverride(b)
	if err != nil || o.IsZero() {
		return nil, err
	}
	out := &poolsv1.GpuHealthPolicy{OnUnhealthyLease: gpuhealth.LeaseActionToProto(o.OnUnhealthyLease)}
	for _, r := range o.Rules {
		rule := &poolsv1.GpuHealthRule{Check: r.Check, Codes: r.Codes, MinCount: r.MinCount, Effect: string(r.Effect)}
		if r.Window > 0 {
			rule.Window = durationpb.New(time.Duration(r.Window))
		}
		out.Rules = append(out.Rules, rule)
	}
	return out, nil
}

// enqueueHealth queues the members of the tenant's pool id whose GPU health may change with the
// pool's policy or membership for the health reconciler.
func enqueueHealth(ctx context.Context, q *db.Queries, tenant, id uuid.UUID) error {
	if err := q.EnqueuePoolGPUHealth(ctx, db.EnqueuePoolGPUHealthParams{Kind: gpuhealth.ReconcileKind, TenantID: tenant, ID: id}); err != nil {
		return fmt.Errorf("queue the members of pool %s for the GPU health reconciler: %w", id, err)
	}
	return nil
}
