package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/state"
)

// ReasonExitedOnTrial is the reason an upgrade failed when the binary that finds its marker is not
// the new one and the new one left no reason: it crashed or exited, and systemd started the old
// binary again.
const ReasonExitedOnTrial = "the new binary exited before holding a session"

// Resume settles the upgrade marker a binary finds at start, before the agent loads the command
// record rec:
//
//   - no marker, or one "done": nothing to do; Resume returns nil.
//   - "trying" and naming this binary's version: this process is the new binary, on trial.
//     Resume returns the Trial, whose command the caller holds in its record (state.Record.Hold)
//     and whose Watch it runs once the agent exists.
//   - "trying" naming another version, or "rolled back": the new binary failed. The upgrade
//     command's failed result, with the reason, is recorded in rec (the agent reports it on its
//     next session), the staged binary is removed and the marker cleared. Resume returns nil.
func (u *Upgrader) Resume(rec daemon.Recorder) (*Trial, error) {
	if u.State == nil {
		return nil, nil
	}
	m, err := u.State.Upgrade()
	if err != nil || m == nil {
		return nil, err
	}
	log := u.logger().With("command_id", m.CommandID, "from", m.From, "to", m.To)
	switch {
	case m.State == state.UpgradeDone:
		return nil, nil
	case m.State == state.UpgradeTrying && m.To == u.Version:
		if u.Path == "" {
			return nil, errors.New("upgrade on trial: this binary does not know where it is installed")
		}
		u.mu.Lock()
		u.trying = m.To
		u.mu.Unlock()
		log.Info("upgrade: this binary is on trial; it replaces the old one once it holds a session", "deadline", m.Deadline)
		return &Trial{u: u, marker: *m}, nil
	case m.State == state.UpgradeTrying || m.State == state.UpgradeRolledBack:
		reason := m.Reason
		if reason == "" {
			reason = ReasonExitedOnTrial
		}
		res := &daemonv1.CommandResult{CommandId: m.CommandID, Error: fmt.Sprintf(
			"upgrade to %s failed: %s; %s runs again and its binary was never replaced", m.To, reason, u.Version)}
		if err := rec.Finished(m.IdempotencyKey, res); err != nil {
			return nil, fmt.Errorf("record the failed upgrade: %w", err)
		}
		log.Warn("upgrade: the new binary failed; reporting the upgrade failed", "reason", reason)
	default:
		log.Warn("upgrade: the marker is in an unknown state; clearing it", "state", m.State)
	}
	if u.Path != "" {
		if err := os.Remove(u.Path + NextSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("remove the failed upgrade's binary: %w", err)
		}
	}
	return nil, u.State.ClearUpgrade()
}

// Trial is an upgrade whose new binary is this process: it holds a session before the marker's
// deadline and commits, or rolls back.
type Trial struct {
	u      *Upgrader
	marker state.Upgrade
}

// Key is the idempotency key of the upgrade command (see daemon.KeyOf).
func (t *Trial) Key() string { return t.marker.IdempotencyKey }

// Watch waits for held (a receive each time the agent holds a session) until the marker's
// deadline.
//
// A session held in time commits: the new binary (Path + NextSuffix) is renamed over Path and
// the directory synced, finish reports the command succeeded with {"version",
// "previousVersion"} (daemon.Agent.Finish: recorded, then sent), and the marker is marked done.
// No session by the deadline, or a commit that fails, rolls back: the marker is marked "rolled
// back" with the reason, and the old binary at Path is exec'd with the same arguments, to report
// the command failed (see Resume). Watch returns when it committed or ctx ended, or with the
// error of an exec that failed, which the caller ends the process with, so that systemd starts
// the old binary instead.
func (t *Trial) Watch(ctx context.Context, held <-chan struct{}, finish func(key string, res *daemonv1.CommandResult)) error {
	u, m := t.u, t.marker
	timer := time.NewTimer(time.Until(m.Deadline))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-timer.C:
		return t.rollback(fmt.Sprintf("held no session within %v", m.Deadline.Sub(m.StartedAt)))
	case <-held:
	}
	if err := t.commit(); err != nil {
		return t.rollback(err.Error())
	}
	out, err := versionResult(m.To, m.From)
	if err != nil {
		return err
	}
	finish(m.IdempotencyKey, &daemonv1.CommandResult{CommandId: m.CommandID, Success: true, Result: out})
	m.State, m.FinishedAt = state.UpgradeDone, time.Now().UTC()
	if err := u.State.SaveUpgrade(m); err != nil {
		u.logger().Error("upgrade: committed, but could not mark the marker done", "err", err)
	}
	u.mu.Lock()
	u.trying = ""
	u.mu.Unlock()
	u.logger().Info("upgrade: committed; this binary replaced the old one", "from", m.From, "to", m.To, "binary", u.Path)
	return nil
}

// commit renames the new binary over the old one. A new binary already renamed (the process
// died between the rename and marking the marker done) is committed already.
func (t *Trial) commit() error {
	u := t.u
	next := u.Path + NextSuffix
	err := os.Rename(next, u.Path)
	if errors.Is(err, os.ErrNotExist) {
		if v, verr := runVersion(context.Background(), u.Path); verr == nil && v == u.Version {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("could not replace %s with the new binary: %w", u.Path, err)
	}
	return syncDir(filepath.Dir(u.Path))
}

// rollback marks the marker rolled back and execs the old binary.
func (t *Trial) rollback(reason string) error {
	u, m := t.u, t.marker
	m.State, m.Reason, m.FinishedAt = state.UpgradeRolledBack, reason, time.Now().UTC()
	if err := u.State.SaveUpgrade(m); err != nil {
		u.logger().Error("upgrade: could not mark the marker rolled back", "err", err)
	}
	u.logger().Warn("upgrade: rolling back to the old binary", "reason", reason, "from", m.To, "to", m.From, "binary", u.Path)
	if err := u.exec(u.Path); err != nil {
		return fmt.Errorf("upgrade: roll back to %s: exec %s: %w", m.From, u.Path, err)
	}
	return nil
}
