package locks

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"
)

// DefaultTTL is the lease TTL of singleton jobs unless they set one: a dead holder's job moves
// to another process within this time.
const DefaultTTL = 15 * time.Second

// Job is work that must run in at most one process at a time, under the lease
// "singleton:<Name>".
type Job struct {
	// Name is unique in the deployment, for example "iam:expire-keys" or "command-sweeper".
	Name string
	// TTL of the lease; DefaultTTL when zero.
	TTL time.Duration
	// Run does the work while the lease is held. Its context ends when the lease is lost or the
	// holder stops; Run should then return promptly. If Run returns while the lease is held,
	// the lease is released and taken again at the next attempt (a returned error is logged).
	Run func(ctx context.Context, l Lease) error
}

// LeaseName is the job's lease.
func (j Job) LeaseName() string { return "singleton:" + j.Name }

// RunJob runs job whenever this holder has its lease, until ctx ends: it tries to take the lease
// at a third of the TTL, renews it as often, and stops the job as soon as a renewal fails, or
// when it cannot confirm the lease for two thirds of a TTL.
func (h *Holder) RunJob(ctx context.Context, job Job) {
	ttl := job.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	name := job.LeaseName()
	log := h.log.With("lease", name)
	var (
		run       *running // non-nil while the lease is held
		lastRenew time.Time
	)
	defer func() {
		if run != nil {
			run.stop()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := h.Release(rctx, name); err != nil {
				log.Warn("release lease", "err", err)
			}
		}
	}()
	for {
		var got []Lease
		var err error
		if run != nil {
			got, err = h.Renew(ctx, ttl, name)
		} else {
			got, err = h.Acquire(ctx, ttl, name)
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("lease round trip failed", "err", err)
			// Unconfirmed for most of a TTL: assume lost rather than risk two runners.
			if run != nil && time.Since(lastRenew) > ttl*2/3 {
				log.Warn("cannot renew lease in time; stopping job")
				run.stop()
				run = nil
			}
		case run != nil && len(got) == 0:
			log.Warn("lost lease; stopping job")
			run.stop()
			run = nil
		case run != nil:
			lastRenew = time.Now()
		case len(got) == 1:
			log.Info("took lease; starting job", "fencing_token", got[0].Token)
			run, lastRenew = start(ctx, job, got[0], log), time.Now()
		}
		if run != nil && run.finished() {
			// The job returned while holding the lease: give it up and try again later.
			run.stop()
			run = nil
			if err := h.Release(ctx, name); err != nil {
				log.Warn("release lease", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(ttl / 3)):
		}
	}
}

// running is a job started under a lease.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func start(ctx context.Context, job Job, l Lease, log *slog.Logger) *running {
	jctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := job.Run(jctx, l); err != nil && jctx.Err() == nil {
			log.Error("job failed", "err", err)
		}
	}()
	return r
}

// stop cancels the job and waits for it to return.
func (r *running) stop() {
	r.cancel()
	<-r.done
}

func (r *running) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// jitter spreads d by ±10%, so processes started together do not renew in lockstep.
func jitter(d time.Duration) time.Duration {
	return d - d/10 + time.Duration(rand.Int64N(int64(d/5)+1))
}
