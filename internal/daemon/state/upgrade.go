package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// UpgradeFile is the upgrade marker (JSON, see Upgrade): written before bcd execs a new binary,
// read by whichever binary starts next, so that the upgrade command gets its result even though
// the process that received it is gone.
const UpgradeFile = "upgrade.json"

// The states of an upgrade marker.
const (
	// UpgradeTrying: the new binary was exec'd and must hold a session before Deadline. A binary
	// of another version that starts and finds this marker knows the new one failed.
	UpgradeTrying = "trying"
	// UpgradeDone: the new binary held a session, replaced the old one on disk and reported the
	// command succeeded.
	UpgradeDone = "done"
	// UpgradeRolledBack: the new binary gave up (Reason says why) and exec'd the old one, which
	// reports the command failed.
	UpgradeRolledBack = "rolled back"
)

// Upgrade is the upgrade marker: which command asked for an upgrade, from which version to
// which, and how far it got.
type Upgrade struct {
	CommandID      string `json:"commandId"`
	IdempotencyKey string `json:"idempotencyKey"`
	From           string `json:"from"`
	To             string `json:"to"`
	// Binary is the installed binary the upgrade replaces; the new one waits beside it as
	// Binary + ".next" until it is committed.
	Binary string `json:"binary"`
	// Deadline is when the new binary must have held a session by, or be rolled back.
	Deadline   time.Time `json:"deadline"`
	State      string    `json:"state"`
	Reason     string    `json:"reason,omitempty"`
	StartedAt  time.Time `json:"startedAt"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
}

// Upgrade reads the upgrade marker; nil when there is none.
func (d *Dir) Upgrade() (*Upgrade, error) {
	if _, err := os.Lstat(d.File(UpgradeFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	data, err := d.readPrivate(UpgradeFile)
	if err != nil {
		return nil, err
	}
	var u Upgrade
	if err := json.Unmarshal(data, &u); err != nil {
		return nil, fmt.Errorf("%s: %w", d.File(UpgradeFile), err)
	}
	if u.IdempotencyKey == "" || u.To == "" || u.State == "" {
		return nil, fmt.Errorf("%s: names no command, version or state", d.File(UpgradeFile))
	}
	return &u, nil
}

// SaveUpgrade replaces the upgrade marker atomically and durably (written, synced, renamed, the
// directory synced) before it returns, so that an exec that follows never outruns it.
func (d *Dir) SaveUpgrade(u Upgrade) error {
	data, err := json.MarshalIndent(u, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the upgrade marker: %w", err)
	}
	return d.write(UpgradeFile, append(data, '\n'))
}

// ClearUpgrade removes the upgrade marker; none is not an error.
func (d *Dir) ClearUpgrade() error {
	if err := os.Remove(d.File(UpgradeFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the upgrade marker: %w", err)
	}
	return syncDir(d.Path)
}
