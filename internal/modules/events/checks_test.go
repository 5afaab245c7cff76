package events

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/module"
)

// runChecks runs the module's checks by name.
func runChecks(t *testing.T, checks []module.Check) map[string]doctor.Finding {
	t.Helper()
	out := map[string]doctor.Finding{}
	for _, c := range checks {
		out[c.Name] = c.Run(t.Context())
	}
	return out
}

func wantFinding(t *testing.T, f doctor.Finding, sev doctor.Severity, cause string) {
	t.Helper()
	if f.Severity != sev || !strings.Contains(f.Cause, cause) {
		t.Fatalf("finding %+v, want %s with %q", f, sev, cause)
	}
}

// TestChecks: reachable and stream are OK once the sink has published (and stream is an error
// before the stream exists); lag reports events waiting and their age; with the server down,
// reachable is an error naming the server without its credentials.
func TestChecks(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	n := startNATS(t)
	m := testModule(strings.Replace(n.url(), "nats://", "nats://alice:pa55word@", 1))
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	checks := m.Checks(module.CheckDeps{Pool: pool})
	got := runChecks(t, checks)
	wantFinding(t, got["reachable"], doctor.OK, "connected to "+n.url())
	wantFinding(t, got["stream"], doctor.Error, "stream BC_EVENTS does not exist")
	wantFinding(t, got["lag"], doctor.OK, "keeping up: 0 events")

	sink := newSink(m.cfg, pool, slog.New(slog.DiscardHandler), instrumentsIn(nil))
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	ev := sinks.Event{ID: 1, TenantID: uuid.New(), Type: "node.ready", Subject: "node/1", Payload: []byte(`{}`), CreatedAt: time.Now()}
	if err := sink.Deliver(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	// Old events after the cursor: the sinks role is not running.
	for _, age := range []string{"5 minutes", "20 minutes"} {
		if _, err := pool.Exec(t.Context(), `INSERT INTO outbox (tenant_id, type, subject, payload, created_at)
			VALUES ($1, 'node.ready', 'node/1', '{}', now() - $2::interval)`, uuid.New(), age); err != nil {
			t.Fatal(err)
		}
		got = runChecks(t, checks)
		wantFinding(t, got["reachable"], doctor.OK, "connected to "+n.url())
		wantFinding(t, got["stream"], doctor.OK, "stream BC_EVENTS holds bc.>: 1 messages")
		if age == "5 minutes" {
			wantFinding(t, got["lag"], doctor.Warning, "1 events not yet published, the oldest 5m0s old")
		} else {
			wantFinding(t, got["lag"], doctor.Error, "2 events not yet published, the oldest 20m0s old")
		}
	}

	n.stop()
	got = runChecks(t, checks)
	wantFinding(t, got["reachable"], doctor.Error, "connect to "+n.url())
	wantFinding(t, got["stream"], doctor.Error, "cannot check the stream")
	for _, f := range got {
		if strings.Contains(f.Cause, "pa55word") || strings.Contains(f.Cause, "alice") {
			t.Fatalf("finding %+v shows the credentials", f)
		}
	}
}

// TestLagWithoutCursor: a sink that never ran is a warning.
func TestLagWithoutCursor(t *testing.T) {
	t.Parallel()
	wantFinding(t, checkLag(t.Context(), dbtest.Pool(t)), doctor.Warning, "never run")
}

// TestStreamWithOtherSubjects: a stream of the module's name that holds other subjects is an
// error, at publish and in doctor, saying which subjects it has and which it needs.
func TestStreamWithOtherSubjects(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	n := startNATS(t)
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "BC_EVENTS", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	m := testModule(n.url())
	const want = "stream BC_EVENTS has the subjects [other.>], not [bc.>]"
	wantFinding(t, m.cfg.checkStream(t.Context()), doctor.Error, want)
	sink := newSink(m.cfg, pool, slog.New(slog.DiscardHandler), instrumentsIn(nil))
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	ev := sinks.Event{ID: 1, TenantID: uuid.New(), Type: "node.ready", Subject: "node/1", Payload: []byte(`{}`), CreatedAt: time.Now()}
	if err := sink.Deliver(t.Context(), ev); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("deliver: %v", err)
	}
}
