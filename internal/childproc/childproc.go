// Package childproc runs a test's helper server (nginx, tinyproxy, an OpenID provider) as a
// child process in its own process group, its output appended to a log file, and stops it with
// everything it started. It is test support: the packages that start real components for tests
// (internal/proxytest, internal/oidctest) share it.
package childproc

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// StopTimeout bounds how long a process may take to exit after SIGTERM before its whole group
// is killed.
const StopTimeout = 10 * time.Second

// Process is a running child in its own process group.
type Process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	stop   func()
}

// Start runs bin with args, env added to this process's environment, and its standard output
// and error appended to logPath (created 0600).
func Start(bin string, args, env []string, logPath string) (*Process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", logPath, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	p.stop = sync.OnceFunc(p.terminate)
	return p, nil
}

// Stop asks the process to exit (SIGTERM), kills its group if it has not within StopTimeout,
// and waits for it; then it kills what the group still holds (workers a master left behind).
// More calls do nothing.
func (p *Process) Stop() { p.stop() }

func (p *Process) terminate() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(StopTimeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// Done reports whether the process has exited.
func (p *Process) Done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// LogSince returns what was appended to the file at path after its first offset bytes.
func LogSince(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// FileSize is the size of the file at path, 0 when it does not exist.
func FileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
