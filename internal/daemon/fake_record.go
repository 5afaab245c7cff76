package daemon

import (
	"sync"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// fakeInterrupted is the error of a command that was running when its FakeDaemon restarted, as
// bcd's record reports one that was running when bcd stopped.
const fakeInterrupted = "interrupted: the daemon restarted while this command ran; it is not run again under the same idempotency key"

// fakeRecord is a FakeDaemon's idempotency record: it outlives the Agents the FakeDaemon runs one
// after the other (its processes), as bcd's record on disk outlives bcd, so that a command
// re-delivered after an upgrade or a reboot is answered instead of run again. Each Agent writes
// through a view of its own generation, so that a process that was stopped cannot overwrite
// what its successor settled.
type fakeRecord struct {
	mu      sync.Mutex
	entries map[string]*fakeEntry
}

type fakeEntry struct {
	commandID string
	result    *daemonv1.CommandResult
	finished  time.Time
	// held: the command outlives the process that started it, and a later one finishes it (an
	// upgrade, reported by the new version once it holds a session).
	held bool
	// minGen is the first generation whose Finished counts: a process that was stopped while
	// the command ran may still call Finished, too late.
	minGen int
}

func newFakeRecord() *fakeRecord { return &fakeRecord{entries: map[string]*fakeEntry{}} }

// view is the Recorder of the Agent of generation gen.
func (r *fakeRecord) view(gen int) Recorder { return fakeRecordView{r: r, gen: gen} }

// hold marks key's command, started by generation gen, as finished by a later generation: its
// next Load reports it running, and gen's own Finished is ignored.
func (r *fakeRecord) hold(key string, gen int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[key]
	if e == nil {
		e = &fakeEntry{}
		r.entries[key] = e
	}
	e.held, e.minGen = true, gen+1
}

// unhold undoes hold: gen finishes the command after all.
func (r *fakeRecord) unhold(key string, gen int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.entries[key]; e != nil {
		e.held, e.minGen = false, gen
	}
}

type fakeRecordView struct {
	r   *fakeRecord
	gen int
}

// Load returns the results finished since `since`; commands held for a later generation come
// back running, and the others still unfinished (their process stopped) come back interrupted.
func (v fakeRecordView) Load(since time.Time) ([]Recorded, error) {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	var out []Recorded
	for key, e := range v.r.entries {
		switch {
		case e.result == nil && e.held:
			out = append(out, Recorded{Key: key, Running: true})
		case e.result == nil:
			e.result = &daemonv1.CommandResult{CommandId: e.commandID, Error: fakeInterrupted}
			e.finished, e.minGen = time.Now(), v.gen
			out = append(out, Recorded{Key: key, Result: e.result, Finished: e.finished})
		case e.finished.Before(since):
			delete(v.r.entries, key)
		default:
			out = append(out, Recorded{Key: key, Result: e.result, Finished: e.finished})
		}
	}
	return out, nil
}

// Started records that a command is about to run.
func (v fakeRecordView) Started(key string, c *daemonv1.Command) error {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	v.r.entries[key] = &fakeEntry{commandID: c.GetId(), minGen: v.gen}
	return nil
}

// Finished records a command's result, unless a later generation owns the command now.
func (v fakeRecordView) Finished(key string, res *daemonv1.CommandResult) error {
	v.r.mu.Lock()
	defer v.r.mu.Unlock()
	e := v.r.entries[key]
	if e == nil {
		e = &fakeEntry{minGen: v.gen}
		v.r.entries[key] = e
	}
	if v.gen < e.minGen {
		return nil
	}
	e.result, e.finished, e.held = res, time.Now(), false
	return nil
}
