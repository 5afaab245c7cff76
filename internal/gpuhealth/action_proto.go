package gpuhealth

import poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"

var leaseActions = map[poolsv1.UnhealthyLeaseAction]LeaseAction{
	poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_UNSPECIFIED: "",
	poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_KEEP:        LeaseKeep,
	poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_END:         LeaseEnd,
}

// LeaseActionFromProto is the action of the API's enum: "" for UNSPECIFIED (someone else
// decides: the pool's policy, or the default), false for a value the API does not define.
// Pools (on_unhealthy_lease) and gangs (on_unhealthy_member) read it the same way.
func LeaseActionFromProto(a poolsv1.UnhealthyLeaseAction) (LeaseAction, bool) {
	v, ok := leaseActions[a]
	return v, ok
}

// LeaseActionToProto is the API's enum for an action; "" is UNSPECIFIED.
func LeaseActionToProto(a LeaseAction) poolsv1.UnhealthyLeaseAction {
	for k, v := range leaseActions {
		if v == a {
			return k
		}
	}
	return poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_UNSPECIFIED
}
