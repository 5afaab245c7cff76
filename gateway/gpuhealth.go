package gateway

import (
	"context"
	"fmt"
	"math"
	"time"

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

// GPU usage minutes are stored only within these bounds of the gateway's clock: a minute further
// ahead is a daemon's clock gone wrong, one older is past what a reconnecting daemon keeps (the
// last 10 minutes) by far.
const (
	usageMaxAhead = 15 * time.Minute
	usageMaxAge   = 24 * time.Hour
)

// recordGPUUsage stores a daemon's per-minute GPU usage on the leases that hold the GPUs, one
// row per lease for the node and the minute, in one statement (RecordGPUUsage): GPUs no lease
// holds are not stored, and a minute sent again replaces its rows. A minute outside the bounds
// (usageMaxAhead, usageMaxAge), or one PostgreSQL refuses, is counted
// (bc_gateway_ignored_messages_total{kind="gpu_usage_dropped"}), logged and dropped: a message
// this gateway cannot use must not end the session (the daemon would send it again). Its size is
// bounded before it gets here, as any message's (limits.daemonEventBytes).
func (g *Gateway) recordGPUUsage(ctx context.Context, q *db.Queries, sess *session, u *daemonv1.GpuUsage) error {
	minute := u.GetMinute().AsTime().UTC().Truncate(time.Minute)
	now := time.Now()
	if !u.GetMinute().IsValid() || minute.After(now.Add(usageMaxAhead)) || minute.Before(now.Add(-usageMaxAge)) {
		g.metrics.IgnoreMessage("gpu_usage_dropped")
		g.log.Warn("a GPU usage minute out of bounds was dropped", "node_id", sess.node, "minute", minute)
		return nil
	}
	p := db.RecordGPUUsageParams{NodeID: sess.node, Minute: minute}
	for _, s := range u.GetGpus() {
		p.Uuids = append(p.Uuids, s.GetUuid())
		p.UtilMeans = append(p.UtilMeans, usageValue(s.UtilMean))
		p.UtilMaxes = append(p.UtilMaxes, usageValue(s.UtilMax))
		active := int32(-1)
		if s.ActiveSeconds != nil {
			active = min(max(s.GetActiveSeconds(), 0), 60)
		}
		p.ActiveSeconds = append(p.ActiveSeconds, active)
		mem := int64(-1)
		if s.MemoryUsedMaxBytes != nil && s.GetMemoryUsedMaxBytes() <= math.MaxInt64 {
			mem = int64(s.GetMemoryUsedMaxBytes())
		}
		p.MemoryUsed = append(p.MemoryUsed, mem)
	}
	if len(p.Uuids) == 0 {
		return nil
	}
	_, err := q.RecordGPUUsage(ctx, p)
	if err != nil && unstorable(err) {
		g.metrics.IgnoreMessage("gpu_usage_dropped")
		g.log.Warn("a GPU usage minute cannot be stored; dropped", "node_id", sess.node, "minute", minute, "err", err)
		return nil
	}
	return err
}

// usageValue is a utilisation as RecordGPUUsage takes it: clamped to 0 to 100, and -1 when the
// daemon did not give it (or gave no number).
func usageValue(v *float32) float64 {
	if v == nil || math.IsNaN(float64(*v)) {
		return -1
	}
	return min(max(float64(*v), 0), 100)
}
