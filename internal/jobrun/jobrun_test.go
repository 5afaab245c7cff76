package jobrun_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestEveryRecordsRuns(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	// Runs 1 and 3 fail, 2 succeeds, 4 finds the lease lost: the loop ends.
	var runs int
	var seen []jobrun.Run
	err := jobrun.Every(ctx, pool, "test-job", time.Millisecond, nil, func(context.Context) error {
		if runs > 0 {
			got, err := jobrun.List(ctx, pool)
			if err != nil || len(got) != 1 {
				t.Fatalf("job runs %v %v", got, err)
			}
			seen = append(seen, got[0])
		}
		runs++
		switch runs {
		case 2:
			return nil
		case 4:
			return fmt.Errorf("sweep: %w", locks.ErrStale)
		}
		return fmt.Errorf("run %d failed", runs)
	})
	if !errors.Is(err, locks.ErrStale) || runs != 4 {
		t.Fatalf("Every = %v after %d runs, want ErrStale after 4", err, runs)
	}
	if len(seen) != 3 ||
		seen[0].LastError != "run 1 failed" || seen[0].LastOKAt != nil ||
		seen[1].LastError != "" || seen[1].LastOKAt == nil ||
		seen[2].LastError != "run 3 failed" || seen[2].LastOKAt == nil || !seen[2].LastOKAt.Equal(*seen[1].LastOKAt) ||
		seen[2].LastRunAt.Before(seen[1].LastRunAt) {
		t.Errorf("recorded runs %+v", seen)
	}

	// Every returns nil when its context ends.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := jobrun.Every(cctx, pool, "test-job", time.Hour, nil, func(context.Context) error { return nil }); err != nil {
		t.Errorf("cancelled Every = %v", err)
	}
}

// TestEveryOrWokenRunsWhenWoken checks that a wake-up starts a run long before the interval,
// and that wake-ups in a burst are not each a run.
func TestEveryOrWokenRunsWhenWoken(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	pool := dbtest.Pool(t)
	wake := make(chan struct{}, 1)
	runs := make(chan time.Time, 100)
	done := make(chan error, 1)
	go func() {
		done <- jobrun.EveryOrWoken(ctx, pool, "woken-job", time.Hour, wake, nil, func(context.Context) error {
			runs <- time.Now()
			return nil
		})
	}()
	<-runs // the first run, at once
	start := time.Now()
	for range 50 {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	select {
	case <-runs:
	case <-time.After(30 * time.Second):
		t.Fatal("a wake-up started no run (the interval is an hour)")
	}
	// The burst made at most a run now and one after the gap, not fifty.
	deadline := time.After(3 * jobrun.MinWokenGap)
	extra := 0
	for wait := true; wait; {
		select {
		case <-runs:
			extra++
		case <-deadline:
			wait = false
		}
	}
	if extra > 1 {
		t.Errorf("50 wake-ups within %v made %d more runs", time.Since(start), extra+1)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("EveryOrWoken = %v", err)
	}
}
