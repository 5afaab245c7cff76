package state

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon"
)

// Record is the agent's idempotency record on disk (daemon.Recorder): one file a command under
// results/, named by the SHA-256 of its idempotency key, written when the command starts and
// again when it finishes. After a restart a re-delivered command is answered from it, and a
// command that was running when the daemon died is reported as interrupted instead of being
// run a second time.
type Record struct {
	dir string
	// Retention is how long finished entries are kept on disk (longest command lifetime, 24h,
	// by default); older ones are pruned as new ones finish.
	Retention time.Duration

	mu        sync.Mutex
	lastPrune time.Time
	held      map[string]bool
}

// Record returns the directory's command record.
func (d *Dir) Record() *Record {
	return &Record{dir: d.File(ResultsDir), Retention: 24 * time.Hour}
}

// entry is one recorded command.
type entry struct {
	Key        string          `json:"key"`
	CommandID  string          `json:"commandId"`
	Type       string          `json:"type,omitempty"`
	StartedAt  time.Time       `json:"startedAt"`
	FinishedAt time.Time       `json:"finishedAt,omitzero"`
	Result     json.RawMessage `json:"result,omitempty"`
}

var _ daemon.Recorder = (*Record)(nil)

// Interrupted is the error of a command that was running when the daemon stopped.
const Interrupted = "interrupted: bcd stopped while this command ran; it is not run again under the same idempotency key"

// Load returns the results recorded since `since`, turning commands that started but never
// finished into failed ones (except those Hold names, which come back as running), and deletes
// older entries.
func (r *Record) Load(since time.Time) ([]daemon.Recorded, error) {
	if err := r.ensureDir(); err != nil {
		return nil, err
	}
	names, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("command record: %w", err)
	}
	var out []daemon.Recorded
	for _, de := range names {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(r.dir, name)
		e, err := readEntry(path)
		if err != nil {
			return nil, err
		}
		if e.FinishedAt.IsZero() && r.isHeld(e.Key) {
			out = append(out, daemon.Recorded{Key: e.Key, Running: true})
			continue
		}
		if e.FinishedAt.IsZero() {
			res := &daemonv1.CommandResult{CommandId: e.CommandID, Error: Interrupted}
			if err := r.write(e, res, time.Now()); err != nil {
				return nil, err
			}
			e.FinishedAt = time.Now()
			out = append(out, daemon.Recorded{Key: e.Key, Result: res, Finished: e.FinishedAt})
			continue
		}
		if e.FinishedAt.Before(since) {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("command record: %w", err)
			}
			continue
		}
		res := &daemonv1.CommandResult{}
		if err := protojson.Unmarshal(e.Result, res); err != nil {
			return nil, fmt.Errorf("%s: result: %w", path, err)
		}
		out = append(out, daemon.Recorded{Key: e.Key, Result: res, Finished: e.FinishedAt})
	}
	return out, nil
}

// Hold makes Load return the unfinished entry of key as still running instead of interrupted:
// its command outlived the process that started it and is finished by this one through
// daemon.Agent.Finish (an upgrade whose new binary reports the result once it holds a session).
func (r *Record) Hold(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held == nil {
		r.held = map[string]bool{}
	}
	r.held[key] = true
}

func (r *Record) isHeld(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[key]
}

// Started records that a command is about to run.
func (r *Record) Started(key string, c *daemonv1.Command) error {
	if err := r.ensureDir(); err != nil {
		return err
	}
	typ, _ := command.PayloadOf(c)
	e := entry{Key: key, CommandID: c.GetId(), Type: typ, StartedAt: time.Now()}
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return writeAtomic(r.dir, fileName(key), data)
}

// Finished records a command's result.
func (r *Record) Finished(key string, res *daemonv1.CommandResult) error {
	if err := r.ensureDir(); err != nil {
		return err
	}
	path := filepath.Join(r.dir, fileName(key))
	e, err := readEntry(path)
	if err != nil {
		e = entry{Key: key, CommandID: res.GetCommandId(), StartedAt: time.Now()}
	}
	if err := r.write(e, res, time.Now()); err != nil {
		return err
	}
	r.prune()
	return nil
}

func (r *Record) write(e entry, res *daemonv1.CommandResult, at time.Time) error {
	raw, err := protojson.Marshal(res)
	if err != nil {
		return fmt.Errorf("command record: encode result: %w", err)
	}
	e.FinishedAt, e.Result = at, raw
	data, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return writeAtomic(r.dir, fileName(e.Key), data)
}

// prune deletes finished entries past the retention, at most once a minute.
func (r *Record) prune() {
	r.mu.Lock()
	if time.Since(r.lastPrune) < time.Minute {
		r.mu.Unlock()
		return
	}
	r.lastPrune = time.Now()
	r.mu.Unlock()
	names, err := os.ReadDir(r.dir)
	if err != nil {
		return
	}
	for _, de := range names {
		info, err := de.Info()
		if err != nil || !strings.HasSuffix(de.Name(), ".json") || time.Since(info.ModTime()) < r.Retention {
			continue
		}
		_ = os.Remove(filepath.Join(r.dir, de.Name()))
	}
}

func (r *Record) ensureDir() error {
	if err := os.Mkdir(r.dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("command record: %w", err)
	}
	fi, err := os.Lstat(r.dir)
	if err != nil {
		return fmt.Errorf("command record: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", r.dir)
	}
	return checkOwner(r.dir, fi, 0o077)
}

func readEntry(path string) (entry, error) {
	var e entry
	fi, err := os.Lstat(path)
	if err != nil {
		return e, err
	}
	if err := checkOwner(path, fi, 0o077); err != nil {
		return e, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return e, fmt.Errorf("%s: %w", path, err)
	}
	if e.Key == "" {
		return e, fmt.Errorf("%s: no idempotency key", path)
	}
	return e, nil
}

// fileName is where a key's entry lives: keys are arbitrary strings, file names are not.
func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:]) + ".json"
}
