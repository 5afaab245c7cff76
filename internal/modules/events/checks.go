package events

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	eventsdb "github.com/better-compute/better-compute/gen/modules/events/db"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/module"
)

// The lag check's limits: the oldest event not yet published may be this old before it is a
// warning, and an error; lagCount bounds how many undelivered events it counts.
const (
	lagWarning = time.Minute
	lagError   = 10 * time.Minute
	lagCount   = 100_000
)

// checks are the module's doctor checks: reachable, stream and lag.
func (m *Module) checks(pool *pgxpool.Pool) []module.Check {
	return []module.Check{
		{Name: "reachable", Run: m.cfg.checkReachable},
		{Name: "stream", Run: m.cfg.checkStream},
		{Name: "lag", Run: func(ctx context.Context) doctor.Finding { return checkLag(ctx, pool) }},
	}
}

// checkReachable connects to the servers, within dialTimeout.
func (c *Config) checkReachable(ctx context.Context) doctor.Finding {
	nc, err := c.dial(ctx)
	if err != nil {
		return doctor.Finding{Severity: doctor.Error, Cause: err.Error(),
			Fix: "check that NATS runs and that this host reaches it; check the module's url, tls and credentials"}
	}
	defer nc.Close()
	return doctor.Finding{Severity: doctor.OK, Cause: "connected to " + redactedURL(nc.ConnectedUrlRedacted()) + " (NATS " + nc.ConnectedServerVersion() + ")"}
}

// checkStream reads the stream: an error when it is missing or holds other subjects, a warning
// when other settings are not the module's.
func (c *Config) checkStream(ctx context.Context) doctor.Finding {
	nc, err := c.dial(ctx)
	if err != nil {
		return doctor.Finding{Severity: doctor.Error, Cause: "cannot check the stream: " + err.Error(),
			Fix: "see the reachable check"}
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return doctor.Finding{Severity: doctor.Error, Cause: "nats jetstream: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	want := c.streamConfig()
	st, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return doctor.Finding{Severity: doctor.Error, Cause: fmt.Sprintf("stream %s does not exist", want.Name),
			Fix: fmt.Sprintf("run a process with the sinks role and the events module: it creates the stream (subjects %s) before its first publish", want.Subjects[0])}
	}
	if err != nil {
		return doctor.Finding{Severity: doctor.Error, Cause: fmt.Sprintf("read stream %s: %v", want.Name, err),
			Fix: "check that the NATS server runs JetStream and that the module's credentials may read streams"}
	}
	info := st.CachedInfo()
	if err := subjectsDiffer(info.Config, want); err != nil {
		return doctor.Finding{Severity: doctor.Error, Cause: err.Error(), Fix: "events are not published until the stream holds the module's subjects"}
	}
	if d := settingsDiffer(info.Config, want); len(d) > 0 {
		return doctor.Finding{Severity: doctor.Warning, Cause: fmt.Sprintf("stream %s: %s", want.Name, strings.Join(d, "; ")),
			Fix: "edit the stream (nats stream edit) or the module's configuration so that they agree; a shorter duplicate window lets a retried event be stored twice"}
	}
	return doctor.Finding{Severity: doctor.OK, Cause: fmt.Sprintf("stream %s holds %s: %d messages", want.Name, want.Subjects[0], info.State.Msgs)}
}

// checkLag reads how far the sink's cursor is behind the outbox.
func checkLag(ctx context.Context, pool *pgxpool.Pool) doctor.Finding {
	lag, err := eventsdb.New(pool).SinkLag(ctx, eventsdb.SinkLagParams{Sink: SinkName, Lim: lagCount})
	if errors.Is(err, pgx.ErrNoRows) {
		return doctor.Finding{Severity: doctor.Warning, Cause: "the NATS sink has never run: it has no cursor",
			Fix: "run a process with the sinks role and the events module enabled"}
	}
	if err != nil {
		return doctor.Finding{Severity: doctor.Error, Cause: "read the NATS sink's cursor: " + err.Error()}
	}
	count := fmt.Sprint(lag.Events)
	if lag.Events >= lagCount {
		count = fmt.Sprintf("at least %d", lagCount)
	}
	oldest := time.Duration(lag.OldestSeconds * float64(time.Second)).Round(time.Second)
	f := doctor.Finding{Severity: doctor.OK, Cause: fmt.Sprintf("keeping up: %s events not yet published", count)}
	if lag.Events > 0 {
		f.Cause += fmt.Sprintf(", the oldest %s old", oldest)
	}
	switch {
	case oldest > lagError:
		f.Severity = doctor.Error
	case oldest > lagWarning:
		f.Severity = doctor.Warning
	default:
		return f
	}
	f.Cause = fmt.Sprintf("%s events not yet published, the oldest %s old", count, oldest)
	f.Fix = "check the reachable and stream checks, the sinks process's logs (sink events:nats) and that a process with the sinks role runs the events module"
	return f
}
