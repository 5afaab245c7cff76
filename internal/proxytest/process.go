package proxytest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/poll"
)

// process is a proxy running in the foreground in its own process group, so that stopping it
// also reaches the workers it forked (nginx's master and workers).
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	stop   func()
}

// startProcess runs bin with args, its standard output and error appended to logPath.
func startProcess(bin string, args []string, logPath string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", logPath, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	p.stop = sync.OnceFunc(p.terminate)
	return p, nil
}

// terminate asks the process to exit (SIGTERM: nginx's fast shutdown, which closes open
// connections instead of waiting for them), kills its group if it has not within stopTimeout,
// and waits for it.
func (p *process) terminate() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
	}
	// Workers left behind by a master that died first.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

// done reports whether the process has exited.
func (p *process) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// logSince returns what was appended to the file at path after its first offset bytes.
func logSince(path string, offset int64) string {
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

// fileSize is the size of the file at path, 0 when it does not exist.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// launch starts a proxy with start and waits until it accepts connections on addr or exits.
// It returns the running process, or nil and what the proxy logged when it exited instead.
func launch(t testing.TB, what, addr, logPath string, start func() (*process, error)) (*process, string) {
	t.Helper()
	offset := fileSize(logPath)
	p, err := start()
	if err != nil {
		t.Fatalf("proxytest: %s: %v", what, err)
	}
	poll.Until(t, startTimeout, what+" listens on "+addr+" or exits", func() bool {
		return p.done() || accepts(addr)
	}, poll.Report(func() string { return logSince(logPath, 0) }))
	if p.done() {
		return nil, logSince(logPath, offset)
	}
	return p, ""
}
