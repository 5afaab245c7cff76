// Package placement is the capacity planner: given a pool's nodes, their devices and
// reservations, the running leases and the tenants' shares, it decides where pending leases go,
// which borrowers give way (preemption), and what each tenant may still take. It reads no
// database and keeps no clock of its own, so the scheduler role's placer and a module that
// plans ahead (the autoscaler, asking what a new machine would let it place) use the same rules.
package placement
