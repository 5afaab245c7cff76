package events

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	eventsdb "github.com/better-compute/better-compute/gen/modules/events/db"
	"github.com/better-compute/better-compute/internal/scrub"
)

// statusEvery is how long the sink gathers outcomes before writing them to events_nats_status:
// one row write for many publishes, at most this late.
const statusEvery = 250 * time.Millisecond

// maxStatusError bounds a recorded error (the column allows 1024).
const maxStatusError = 1000

// statusRecorder gathers the sink's outcomes and writes them to its events_nats_status row a
// batch at a time, at most statusEvery after the first of a batch. A batch that cannot be written
// is kept for the next. What a process had not written when it died is lost: the row reports,
// the sink's cursor decides.
type statusRecorder struct {
	q            *eventsdb.Queries
	sink, stream string
	log          *slog.Logger

	mu      sync.Mutex
	pending pendingStatus
	timer   *time.Timer
	closed  bool

	// writing serialises writes, so a row never moves back to an older batch.
	writing sync.Mutex
}

// pendingStatus is a batch not yet written.
type pendingStatus struct {
	dirty           bool
	published       int64
	lastID, lastSeq int64
	lastErr         string
}

func newStatusRecorder(pool *pgxpool.Pool, sink, stream string, log *slog.Logger) *statusRecorder {
	return &statusRecorder{q: eventsdb.New(pool), sink: sink, stream: stream, log: log}
}

// published records an acknowledged publish; a duplicate the stream dropped moves nothing but
// the error.
func (r *statusRecorder) published(eventID int64, seq uint64, duplicate bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &r.pending
	if !duplicate {
		p.published++
		p.lastID, p.lastSeq = max(p.lastID, eventID), max(p.lastSeq, int64(seq))
	}
	p.lastErr, p.dirty = "", true
	r.schedule()
}

// failed records a failed publish.
func (r *statusRecorder) failed(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending.lastErr, r.pending.dirty = scrub.Truncate(err.Error(), maxStatusError), true
	r.schedule()
}

// schedule starts the batch's timer; r.mu is held.
func (r *statusRecorder) schedule() {
	if r.timer == nil && !r.closed {
		r.timer = time.AfterFunc(statusEvery, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.flush(ctx); err != nil {
				r.log.Warn("record the NATS sink's status", "err", err)
			}
		})
	}
}

// flush writes the pending batch. On failure the batch is merged back, to be written with the
// next.
func (r *statusRecorder) flush(ctx context.Context) error {
	r.writing.Lock()
	defer r.writing.Unlock()
	r.mu.Lock()
	p := r.pending
	r.pending, r.timer = pendingStatus{}, nil
	r.mu.Unlock()
	if !p.dirty {
		return nil
	}
	err := r.q.RecordNatsStatus(ctx, eventsdb.RecordNatsStatusParams{
		Sink: r.sink, Stream: r.stream, LastEventID: p.lastID, LastStreamSeq: p.lastSeq,
		PublishedInBatch: p.published, LastError: p.lastErr,
	})
	if err == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	n := &r.pending
	if !n.dirty {
		n.lastErr = p.lastErr
	}
	n.published += p.published
	n.lastID, n.lastSeq = max(n.lastID, p.lastID), max(n.lastSeq, p.lastSeq)
	n.dirty = true
	r.schedule()
	return err
}

// close writes what is pending and stops the timer.
func (r *statusRecorder) close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	return r.flush(ctx)
}
