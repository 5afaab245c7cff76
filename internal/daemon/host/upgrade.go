package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/release"
)

// Upgrade limits and defaults.
const (
	// DefaultMaxBinary bounds the size of a binary an upgrade downloads.
	DefaultMaxBinary = 512 << 20
	// DefaultUpgradeTimeout bounds an upgrade's downloads, redirects included (the command's
	// deadline bounds them too).
	DefaultUpgradeTimeout = 5 * time.Minute
	// DefaultUpgradeDeadline is how long a new binary has to hold a session before it is rolled
	// back (bcd run --upgrade-deadline).
	DefaultUpgradeDeadline = 2 * time.Minute
	// NextSuffix names the new binary beside the installed one while it is on trial:
	// /usr/local/bin/bcd.next.
	NextSuffix = ".next"
)

// Upgrader runs the "upgrade" command, which bcd has only when run with --release-url and
// --release-key, and carries an upgrade across the exec into the new binary.
//
// An upgrade names a release version only. Its binary is trusted because the release's
// SHA256SUMS is signed by one of Keys for that very version, and its bytes match SHA256SUMS. The
// new binary is staged beside the installed one (Path + NextSuffix) and exec'd in place, on
// trial: Path stays as it was, so a crash of the new binary brings the old one back (systemd
// restarts Path). Only once the new binary holds a session does it rename itself over Path and
// report the upgrade succeeded; see Resume and Trial.
type Upgrader struct {
	// Path is the installed binary an upgrade replaces; its directory must be writable.
	Path string
	// Version is the running binary's version.
	Version string
	// Release is where releases are fetched from; nil refuses every upgrade.
	Release *ReleaseSource
	// Keys verify a release's SHA256SUMS.minisig; a signature by any of them is accepted.
	Keys []*release.PublicKey
	// State holds the upgrade marker and the command record.
	State *state.Dir
	// Deadline is how long the new binary has to hold a session (DefaultUpgradeDeadline when 0).
	Deadline time.Duration
	// Client fetches releases; http.DefaultClient's settings when nil. Its CheckRedirect is
	// replaced by one that follows only redirects under Release.
	Client *http.Client
	// MaxBytes bounds the binary's download; DefaultMaxBinary when 0.
	MaxBytes int64
	// Timeout bounds the downloads of an upgrade; DefaultUpgradeTimeout when 0.
	Timeout time.Duration
	// Args and Env are what a binary is exec'd with; the running process's when nil.
	Args, Env []string
	// Exec replaces the running process with the binary at path (syscall.Exec when nil), and
	// returns only when that fails. Tests record the call and return nil instead.
	Exec   func(path string, args, env []string) error
	Logger *slog.Logger

	mu     sync.Mutex // one upgrade at a time
	trying string     // the version on trial in this process, until it is committed
}

// ErrHandedOver is what Upgrade returns when Exec returned nil, which only a test's stand-in
// does: the new binary has the upgrade now and reports its result.
var ErrHandedOver = errors.New("upgrade: handed over to the new binary, which reports the result")

// Upgrade upgrades to the release version the payload names, as the command cmd asks.
//
// The running version succeeds at once with {"version", "previousVersion"} both that version.
// Any other is fetched and verified (see stage); anything that does not verify fails the
// command saying what, with nothing replaced and nothing run. A verified binary is staged as
// Path + NextSuffix, an upgrade marker (state "trying", with the command, both versions and the
// deadline) is saved, and the new binary is exec'd in this process with the same arguments and
// environment. Upgrade does not return then: the new binary reports the command's result once
// it holds a session, or the old one reports it failed (see Resume).
func (u *Upgrader) Upgrade(ctx context.Context, cmd *daemonv1.Command) (*structpb.Struct, error) {
	version := cmd.GetUpgrade().GetVersion()
	if err := command.ValidateUpgrade(version); err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	if version == u.Version {
		u.logger().Info("upgrade: already running this version; nothing to do", "version", version)
		return versionResult(version, version)
	}
	if u.Release == nil || len(u.Keys) == 0 {
		return nil, ErrUpgradeNotAllowed
	}
	if u.Path == "" || u.State == nil {
		return nil, errors.New("upgrade: this daemon does not know its own binary or state directory; nothing fetched")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.trying != "" {
		return nil, fmt.Errorf("upgrade: version %s is on trial in this process until it holds a session; nothing fetched", u.trying)
	}
	next, reported, err := u.stage(ctx, version)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	marker := state.Upgrade{
		CommandID: cmd.GetId(), IdempotencyKey: daemon.KeyOf(cmd), From: u.Version, To: version, Binary: u.Path,
		Deadline: now.Add(u.deadline()), State: state.UpgradeTrying, StartedAt: now,
	}
	if err := u.State.SaveUpgrade(marker); err != nil {
		_ = os.Remove(next)
		return nil, fmt.Errorf("upgrade: %w; nothing replaced", err)
	}
	u.logger().Info("upgrade: verified the new binary; exec'ing it on trial",
		"from", u.Version, "to", reported, "binary", next, "deadline", marker.Deadline)
	if err := u.exec(next); err != nil {
		_ = u.State.ClearUpgrade()
		_ = os.Remove(next)
		return nil, fmt.Errorf("upgrade: exec the new binary %s: %w; still running %s, nothing replaced", next, err, u.Version)
	}
	return nil, ErrHandedOver
}

// exec replaces the process with the binary at path, with the process's arguments and
// environment.
func (u *Upgrader) exec(path string) error {
	args, env, run := u.Args, u.Env, u.Exec
	if args == nil {
		args = os.Args
	}
	if env == nil {
		env = os.Environ()
	}
	if run == nil {
		run = syscall.Exec
	}
	return run(path, args, env)
}

func (u *Upgrader) deadline() time.Duration {
	if u.Deadline <= 0 {
		return DefaultUpgradeDeadline
	}
	return u.Deadline
}

// versionResult is a successful upgrade's result.
func versionResult(version, previous string) (*structpb.Struct, error) {
	return structpb.NewStruct(map[string]any{"version": version, "previousVersion": previous})
}

func (u *Upgrader) logger() *slog.Logger {
	if u.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return u.Logger
}
