package gateway

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/scrub"
)

// recordGPUHealth stores a daemon's GPU health snapshot when it differs from the stored one and
// queues the node for the health reconciler in the same statement, then wakes the reconciler:
// a fault reaches the health of its GPU in one round trip to the database and one reconcile. The
// snapshot's time is not stored, so a snapshot sent again (after a reconnect) writes nothing. A
// snapshot over the limits (gpuhealth.MaxSignals, MaxCheckBytes, MaxDetailBytes) or that cannot be
// stored is logged and dropped; the node keeps the one before.
func (g *Gateway) recordGPUHealth(ctx context.Context, q *db.Queries, sess *session, h *daemonv1.GpuHealth) error {
	if field, why := checkGPUHealth(h); field != "" {
		g.log.Warn("a GPU health snapshot was dropped", "node_id", sess.node, "field", field, "why", why)
		return nil
	}
	scrub.Message(h)
	h.Time = nil
	report, err := protojson.Marshal(h)
	if err == nil {
		var changed bool
		changed, err = q.RecordGPUHealth(ctx, db.RecordGPUHealthParams{
			NodeID: sess.node, Report: report, ProbeError: h.GetProbeError(), Kind: gpuhealth.ReconcileKind,
		})
		if err == nil {
			if changed && g.opts.Wake != nil {
				g.opts.Wake(gpuhealth.ReconcileKind)
			}
			return nil
		}
	}
	if unstorable(err) || isNoRows(err) {
		g.log.Warn("a GPU health snapshot cannot be stored; keeping the previous one", "node_id", sess.node, "err", err)
		return nil
	}
	return err
}

// checkGPUHealth names the first field of h over its limits, and why; "" when none is.
func checkGPUHealth(h *daemonv1.GpuHealth) (field, why string) {
	if n := len(h.GetSignals()); n > gpuhealth.MaxSignals {
		return "signals", fmt.Sprintf("%d signals, at most %d", n, gpuhealth.MaxSignals)
	}
	if n := len(h.GetProbeError()); n > gpuhealth.MaxDetailBytes {
		return "probe_error", fmt.Sprintf("%d bytes, at most %d", n, gpuhealth.MaxDetailBytes)
	}
	for i, s := range h.GetSignals() {
		switch {
		case s.GetCheck() == "" || len(s.GetCheck()) > gpuhealth.MaxCheckBytes:
			return fmt.Sprintf("signals[%d].check", i), fmt.Sprintf("1 to %d bytes", gpuhealth.MaxCheckBytes)
		case len(s.GetDetail()) > gpuhealth.MaxDetailBytes:
			return fmt.Sprintf("signals[%d].detail", i), fmt.Sprintf("at most %d bytes", gpuhealth.MaxDetailBytes)
		case len(s.GetGpuUuid()) > gpuhealth.MaxCheckBytes || len(s.GetPciBusId()) > gpuhealth.MaxCheckBytes:
			return fmt.Sprintf("signals[%d].gpu_uuid", i), fmt.Sprintf("GPU UUID and PCI bus id at most %d bytes", gpuhealth.MaxCheckBytes)
		}
	}
	return "", ""
}

// ignoreGPUUsage accepts a daemon's per-minute GPU usage summary and drops it: storing usage is
// not built yet, and a message this gateway cannot use must not end the session (the daemon
// would reconnect and send it again). It is logged at debug and counted
// (bc_gateway_ignored_messages_total{kind="gpu_usage"}). Its size is bounded before it gets
// here, as any message's (limits.daemonEventBytes).
func (g *Gateway) ignoreGPUUsage(sess *session, u *daemonv1.GpuUsage) {
	g.metrics.IgnoreMessage("gpu_usage")
	g.log.Debug("GPU usage not stored (not built yet)", "node_id", sess.node,
		"minute", u.GetMinute().AsTime(), "gpus", len(u.GetGpus()))
}
