package sim

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// ControlListener is the control API's unix socket. Closing it removes the socket file.
type ControlListener struct {
	*net.UnixListener
	// Path is the socket's.
	Path string
	once sync.Once
}

// ListenControl listens for the control API at path, a unix socket only its owner may connect to
// (mode 0600: it is bound under a temporary name, restricted, then renamed into place, so it is
// never open to others). The directory is created (0700) if missing. A socket already at path
// that answers is an error (another simulator serves it); a stale one, left by a simulator that
// died, is replaced.
func ListenControl(path string) (*ControlListener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sim control socket: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return nil, fmt.Errorf("sim control socket %s: another simulator is listening there", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sim control socket: remove the stale socket: %w", err)
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	_ = os.Remove(tmp)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("sim control socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // the file is renamed; Close removes it by its new name
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("sim control socket %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = ln.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("sim control socket %s: %w", path, err)
	}
	return &ControlListener{UnixListener: ln, Path: path}, nil
}

// Close stops listening and removes the socket file.
func (l *ControlListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { _ = os.Remove(l.Path) })
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
