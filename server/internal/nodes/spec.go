package nodes

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gen/db"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
)

// Limits of a NodeSpec.
const (
	MaxTaints = 32
	// MaxConfigBytes bounds the config blob, as JSON.
	MaxConfigBytes = 64 << 10
	// MaxSecrets bounds the names of secrets a spec grants the node.
	MaxSecrets = 64
)

// UpdateSpec replaces a node's spec. The generation grows only when the spec changes; the
// NodeSpec reconciler is enqueued in the same transaction.
func (s *Service) UpdateSpec(ctx context.Context, req *nodesv1.UpdateSpecRequest) (*nodesv1.UpdateSpecResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	spec, err := specFromProto("spec", req.GetSpec())
	if err != nil {
		return nil, err
	}
	if req.GetExpectedGeneration() < 0 {
		return nil, apierr.InvalidArgument("expected_generation", "must not be negative")
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*nodesv1.UpdateSpecResponse, error) {
		tx.Target("node", id)
		n, err := tx.Q.LockNodeOfTenant(ctx, db.LockNodeOfTenantParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "node %s not found", id)
		}
		if g := req.GetExpectedGeneration(); g != 0 && g != n.SpecGeneration {
			return nil, apierr.FailedPrecondition("the spec of node %s is at generation %d, not %d: it changed meanwhile; read it again", id, n.SpecGeneration, g)
		}
		if err := updateSpec(ctx, tx, n, spec); err != nil {
			return nil, err
		}
		pn, err := s.nodeInTx(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		return &nodesv1.UpdateSpecResponse{Node: pn}, nil
	})
}

// updateSpec stores spec for the locked node n when it differs from the stored one, with a
// node.spec.updated event and the NodeSpec reconciler enqueued, and woken after the commit.
func updateSpec(ctx context.Context, tx *admission.Tx, n db.Node, spec fleet.Spec) error {
	updated, err := tx.Q.UpdateNodeSpec(ctx, db.UpdateNodeSpecParams{TenantID: n.TenantID, ID: n.ID, Spec: spec.Encode()})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil // the same spec
	}
	if err != nil {
		return fmt.Errorf("update spec of node %s: %w", n.ID, err)
	}
	if err := tx.Emit(n.TenantID, event.NodeSpecUpdated{ID: n.ID, Generation: updated.SpecGeneration}); err != nil {
		return err
	}
	if err := fleet.Enqueue(ctx, tx.Q, fleet.KindSpec, n.ID); err != nil {
		return err
	}
	tx.Wake(fleet.KindSpec)
	return nil
}

// specFromProto validates a NodeSpec; errors name the field under prefix.
func specFromProto(prefix string, p *nodesv1.NodeSpec) (fleet.Spec, error) {
	var spec fleet.Spec
	if p == nil {
		return spec, apierr.InvalidArgument(prefix, "required (an empty spec manages nothing)")
	}
	if p.GetLabels() != nil {
		if err := fleet.ValidateLabels(prefix+".labels", p.GetLabels().GetValues()); err != nil {
			return spec, err
		}
		spec.Labels = maps.Clone(p.GetLabels().GetValues())
		if spec.Labels == nil {
			spec.Labels = map[string]string{}
		}
	}
	taints, err := taintsFromProto(prefix+".taints", p.GetTaints())
	if err != nil {
		return spec, err
	}
	spec.Taints = taints
	if v := p.GetDaemonVersion(); v != "" {
		if err := command.ValidateUpgrade(v); err != nil {
			return spec, apierr.InvalidArgument(prefix+".daemon_version", "%q is not a release version: letters, digits, '.', '+' and '-', at most 64", v)
		}
	}
	spec.DaemonVersion = p.GetDaemonVersion()
	if p.GetConfig() != nil {
		b, err := protojson.Marshal(p.GetConfig())
		if err != nil {
			return spec, apierr.InvalidArgument(prefix+".config", "%v", err)
		}
		if len(b) > MaxConfigBytes {
			return spec, apierr.InvalidArgument(prefix+".config", "at most %d bytes as JSON, got %d", MaxConfigBytes, len(b))
		}
		spec.Config = b
	}
	secrets, err := secretNames(prefix+".secrets", p.GetSecrets())
	if err != nil {
		return spec, err
	}
	spec.Secrets = secrets
	if spec.TunnelPorts, err = fleet.ValidateTunnelPorts(prefix+".tunnel_ports", p.GetTunnelPorts()); err != nil {
		return spec, err
	}
	return spec, nil
}

// secretNames validates the names of the secrets a spec grants, with the syntax of label keys,
// and returns them sorted without duplicates (nil for none).
func secretNames(field string, names []string) ([]string, error) {
	if len(names) > MaxSecrets {
		return nil, apierr.InvalidArgument(field, "at most %d secrets, got %d", MaxSecrets, len(names))
	}
	for i, n := range names {
		if !fleet.ValidLabelKey(n) {
			return nil, apierr.InvalidArgument(fmt.Sprintf("%s[%d]", field, i), "%q must be 1 to 63 letters, digits, '-', '_', '.' and '/', starting and ending with a letter or digit", n)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func taintsFromProto(field string, ts []*nodesv1.Taint) ([]fleet.Taint, error) {
	if len(ts) > MaxTaints {
		return nil, apierr.InvalidArgument(field, "at most %d taints, got %d", MaxTaints, len(ts))
	}
	out := make([]fleet.Taint, 0, len(ts))
	seen := map[[2]string]bool{}
	for i, t := range ts {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !fleet.ValidLabelKey(t.GetKey()) {
			return nil, apierr.InvalidArgument(f+".key", "%q must be 1 to 63 letters, digits, '-', '_', '.' and '/', starting and ending with a letter or digit", t.GetKey())
		}
		if !fleet.ValidLabelValue(t.GetValue()) {
			return nil, apierr.InvalidArgument(f+".value", "%q must be empty or 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit", t.GetValue())
		}
		switch t.GetEffect() {
		case fleet.EffectNoSchedule, fleet.EffectPreferNoSchedule, fleet.EffectNoExecute:
		default:
			return nil, apierr.InvalidArgument(f+".effect", "%q must be %s, %s or %s", t.GetEffect(),
				fleet.EffectNoSchedule, fleet.EffectPreferNoSchedule, fleet.EffectNoExecute)
		}
		k := [2]string{t.GetKey(), t.GetEffect()}
		if seen[k] {
			return nil, apierr.InvalidArgument(f, "a second taint with key %q and effect %s", t.GetKey(), t.GetEffect())
		}
		seen[k] = true
		out = append(out, fleet.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: t.GetEffect()})
	}
	return out, nil
}

func taintsToProto(ts []fleet.Taint) []*nodesv1.Taint {
	var out []*nodesv1.Taint
	for _, t := range ts {
		out = append(out, &nodesv1.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect})
	}
	return out
}

func specToProto(s fleet.Spec) (*nodesv1.NodeSpec, error) {
	out := &nodesv1.NodeSpec{Taints: taintsToProto(s.Taints), DaemonVersion: s.DaemonVersion, Secrets: s.Secrets,
		TunnelPorts: s.TunnelPorts}
	if s.Labels != nil {
		out.Labels = &nodesv1.LabelSet{Values: s.Labels}
	}
	if s.Config != nil {
		out.Config = &structpb.Struct{}
		if err := protojson.Unmarshal(s.Config, out.Config); err != nil {
			return nil, fmt.Errorf("decode spec config: %w", err)
		}
	}
	return out, nil
}
