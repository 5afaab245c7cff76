// Package jobrun runs the periodic loop of a background job and records, in the job_runs
// table, when each run happened and how it went, for `doctor` and for operators.
//
// It is its own package rather than part of workers/locks because it is about the work, not
// the lock: a locks.Job's Run calls Every, and a loop that runs under no lock (or several
// loops under one lock) can record its runs the same way with Record.
package jobrun

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/locks"
)

// Run is a job's last recorded run.
type Run struct {
	Name      string
	LastRunAt time.Time
	// LastError is empty when the last run succeeded.
	LastError string
	// LastOKAt is the last run that succeeded; nil until one has.
	LastOKAt *time.Time
}

// Record notes that the job name ran just now (by the database's clock), failing with runErr,
// or succeeding when runErr is nil. q may be a pool or a transaction.
func Record(ctx context.Context, q db.DBTX, name string, runErr error) error {
	msg := ""
	if runErr != nil {
		msg = runErr.Error()
		if msg == "" {
			msg = "error"
		}
	}
	return db.New(q).RecordJobRun(ctx, db.RecordJobRunParams{Name: name, LastError: msg})
}

// List returns every job's last run, by name.
func List(ctx context.Context, q db.DBTX) ([]Run, error) {
	rows, err := db.New(q).ListJobRuns(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Run, len(rows))
	for i, r := range rows {
		out[i] = Run{Name: r.Name, LastRunAt: r.LastRunAt, LastError: r.LastError, LastOKAt: r.LastOkAt}
	}
	return out, nil
}

// Every runs fn at once and then every interval until ctx ends, recording each run under name
// in q's job_runs. A failed run is logged and retried at the next interval; a run that finds
// its lock lost (locks.ErrStale) ends the loop with that error, since the lock's new holder
// now does the work. Every returns nil when ctx ends.
func Every(ctx context.Context, q db.DBTX, name string, interval time.Duration, log *slog.Logger, fn func(context.Context) error) error {
	return EveryOrWoken(ctx, q, name, interval, nil, log, fn)
}

// MinWokenGap is the least time between two runs that wake-ups start, so a burst of them (a
// fleet reconnecting) costs a few runs a second, not one each.
const MinWokenGap = 100 * time.Millisecond

// EveryOrWoken is Every, but a receive on wake also starts a run, MinWokenGap after the last
// one at the earliest. A nil wake never fires.
func EveryOrWoken(ctx context.Context, q db.DBTX, name string, interval time.Duration, wake <-chan struct{}, log *slog.Logger, fn func(context.Context) error) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := time.NewTimer(0)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-wake:
			if gap := MinWokenGap - time.Since(last); gap > 0 {
				t.Reset(min(gap, interval))
				continue
			}
		}
		last = time.Now()
		err := fn(ctx)
		if ctx.Err() != nil {
			return nil // stopped mid-run: not a result worth recording
		}
		if err != nil {
			log.Warn("job run failed", "job", name, "err", err)
		}
		if rerr := Record(ctx, q, name, err); rerr != nil && ctx.Err() == nil {
			log.Warn("record job run", "job", name, "err", rerr)
		}
		if errors.Is(err, locks.ErrStale) {
			return err
		}
		t.Reset(interval)
	}
}
