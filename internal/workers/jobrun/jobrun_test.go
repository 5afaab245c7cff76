package jobrun_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/workers/jobrun"
	"github.com/better-compute/better-compute/internal/workers/locks"
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
