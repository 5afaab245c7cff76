package pools

import (
	"github.com/better-compute/better-compute/gen/db"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/fleet"
)

// Bounds of a pool's remediation policy, as pools.proto documents them.
const (
	// MaxRemediationNodes bounds RemediationPolicy.max_nodes (the column's CHECK).
	MaxRemediationNodes = 10000
	// DefaultFailureDomainLabel is the failure domain label of a pool created without a policy.
	DefaultFailureDomainLabel = "rack"
)

// remediationSettings are a pool's remediation columns.
type remediationSettings struct {
	auto     bool
	maxNodes int32
	domain   string
}

// remediationPolicy validates a request's remediation policy into the pool's columns; nil is
// remediations on, one member at a time, with the failure domain label unset (dflt on create).
func remediationPolicy(p *poolsv1.RemediationPolicy, dflt string) (remediationSettings, error) {
	if p == nil {
		return remediationSettings{auto: true, maxNodes: 1, domain: dflt}, nil
	}
	var errs []error
	n := p.GetMaxNodes()
	switch {
	case n == 0:
		n = 1
	case n < 0 || n > MaxRemediationNodes:
		errs = append(errs, apierr.InvalidArgument("remediation.max_nodes", "must be 1 to %d (0 means 1), got %d", MaxRemediationNodes, n))
	}
	if l := p.GetFailureDomainLabel(); l != "" && !fleet.ValidLabelKey(l) {
		errs = append(errs, apierr.InvalidArgument("remediation.failure_domain_label", "must be a node label key or empty, got %q", l))
	}
	if err := apierr.Join(errs...); err != nil {
		return remediationSettings{}, err
	}
	return remediationSettings{auto: !p.GetDisabled(), maxNodes: n, domain: p.GetFailureDomainLabel()}, nil
}

// remediationToProto is a stored pool's remediation policy.
func remediationToProto(r db.Pool) *poolsv1.RemediationPolicy {
	return &poolsv1.RemediationPolicy{Disabled: !r.RemediationAuto, MaxNodes: r.RemediationMaxNodes, FailureDomainLabel: r.RemediationDomain}
}
