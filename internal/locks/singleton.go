package locks

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// DefaultTTL is the lock TTL of singleton jobs unless they set one: a dead holder's job moves
// to another process within this time.
const DefaultTTL = 15 * time.Second

// Job is work that must run in at most one process at a time, under the lock
// "singleton:<Name>".
type Job struct {
	// Name is unique in the deployment, for example "iam:expire-keys" or "command-sweeper".
	Name string
	// TTL of the lock; DefaultTTL when zero.
	TTL time.Duration
	// Run does the work while the lock is held. Its context ends when the lock is lost or the
	// holder stops; Run should then return promptly. If Run returns while the lock is held,
	// the lock is released and taken again at the next attempt (a returned error is logged).
	Run func(ctx context.Context, l Lock) error
}

// LockName is the name of the job's lock.
func (j Job) LockName() string { return "singleton:" + j.Name }

// RunJob runs job whenever this holder has its lock, until ctx ends: it tries to take the lock
// at a third of the TTL, renews it as often, and stops the job as soon as a renewal fails, or
// when it cannot confirm the lock for two thirds of a TTL.
func (h *Holder) RunJob(ctx context.Context, job Job) {
	ttl := job.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	name := job.LockName()
	log := h.log.With("lock", name)
	var (
		run       *running // non-nil while the lock is held
		lastRenew time.Time
	)
	defer func() {
		if run != nil {
			run.stop()
		}
		// Released whether or not a job ran: an Acquire that the stop interrupted may have
		// taken the lock in the database all the same, and would otherwise keep it for a TTL.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := h.Release(rctx, name); err != nil {
			log.Warn("release lock", "err", err)
		}
	}()
	for {
		var got []Lock
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
			log.Warn("lock round trip failed", "err", err)
			// Unconfirmed for most of a TTL: assume lost rather than risk two runners.
			if run != nil && time.Since(lastRenew) > ttl*2/3 {
				log.Warn("cannot renew lock in time; stopping job")
				run.stop()
				run = nil
			}
		case run != nil && len(got) == 0:
			log.Warn("lost lock; stopping job")
			run.stop()
			run = nil
		case run != nil:
			lastRenew = time.Now()
		case len(got) == 1:
			log.Info("took lock; starting job", "fencing_token", got[0].Token)
			run, lastRenew = start(ctx, job, got[0], log), time.Now()
		}
		if run != nil && run.finished() {
			// The job returned while holding the lock: give it up and try again later.
			run.stop()
			run = nil
			if err := h.Release(ctx, name); err != nil {
				log.Warn("release lock", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(ttl / 3)):
		}
	}
}

// running is a job started under a lock.
type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func start(ctx context.Context, job Job, l Lock, log *slog.Logger) *running {
	jctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := runJob(jctx, job, l); err != nil && jctx.Err() == nil {
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

// runJob runs a job, turning a panic (in a module's job, say) into an error: the job gives up
// its lock and is started again later, and the process goes on.
func runJob(ctx context.Context, job Job, l Lock) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("job %s panicked: %v", job.Name, p)
		}
	}()
	return job.Run(ctx, l)
}
