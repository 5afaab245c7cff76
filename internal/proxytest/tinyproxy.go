package proxytest

import (
	"fmt"
	"github.com/better-compute/better-compute/internal/childproc"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tinyproxy is a tinyproxy on a loopback port that forwards CONNECT to any port, as a corporate
// HTTPS_PROXY would. Its methods are safe for concurrent use.
type Tinyproxy struct {
	port    int
	logPath string

	mu   sync.Mutex
	proc *childproc.Process
}

// TinyproxyOptions adjusts StartTinyproxyWith.
type TinyproxyOptions struct {
	// Timeout is tinyproxy's Timeout, rounded up to whole seconds, 10 minutes when zero: how long
	// a CONNECT tunnel may stay idle before tinyproxy closes it, and how long tinyproxy waits for
	// a client's complete request before answering with an HTTP error (so a TLS client dialing
	// tinyproxy directly hears nothing until then).
	Timeout time.Duration
	// Wrap, when set, is a command prefix tinyproxy runs under (HostsNamespace's, so that it
	// resolves the names the test's clients send in CONNECT the way they do).
	Wrap []string
}

// StartTinyproxy starts tinyproxy with the default options until the test ends. It skips the
// test when tinyproxy is not installed (unless RequireEnv is set) and fails it when tinyproxy
// does not start.
func StartTinyproxy(t testing.TB) *Tinyproxy {
	t.Helper()
	return StartTinyproxyWith(t, TinyproxyOptions{})
}

// StartTinyproxyWith is StartTinyproxy with o.
func StartTinyproxyWith(t testing.TB, o TinyproxyOptions) *Tinyproxy {
	t.Helper()
	timeout := 600
	if o.Timeout > 0 {
		timeout = int((o.Timeout + time.Second - 1) / time.Second)
	}
	bin := lookBinary(t, "tinyproxy", "tinyproxy", "/usr/bin", "/usr/sbin")
	dir := t.TempDir()
	p := &Tinyproxy{logPath: filepath.Join(dir, "tinyproxy.log")}
	conf := filepath.Join(dir, "tinyproxy.conf")
	t.Cleanup(p.Stop)
	for attempt := 1; ; attempt++ {
		p.port = freePort(t)
		if err := os.WriteFile(conf, []byte(tinyproxyConf(p.port, timeout, p.logPath)), 0o600); err != nil {
			t.Fatalf("proxytest: writing tinyproxy.conf: %v", err)
		}
		proc, failed := launch(t, "tinyproxy", p.Addr(), p.logPath, func() (*childproc.Process, error) {
			args := []string{"-d", "-c", conf}
			if len(o.Wrap) > 0 {
				return childproc.Start(o.Wrap[0], append(append(o.Wrap[1:len(o.Wrap):len(o.Wrap)], bin), args...), nil, p.logPath)
			}
			return childproc.Start(bin, args, nil, p.logPath)
		})
		if proc != nil {
			p.mu.Lock()
			p.proc = proc
			p.mu.Unlock()
			return p
		}
		if attempt == bindAttempts || !strings.Contains(failed, "Address already in use") {
			t.Fatalf("proxytest: tinyproxy exited:\n%s", failed)
		}
	}
}

// Addr is tinyproxy's address, "127.0.0.1:port".
func (p *Tinyproxy) Addr() string { return loopback(p.port) }

// URL is tinyproxy's URL, "http://127.0.0.1:port", the value of HTTPS_PROXY that reaches it.
func (p *Tinyproxy) URL() string { return "http://" + p.Addr() }

// Stop stops tinyproxy and waits until it has exited. Stopping a stopped tinyproxy does nothing.
func (p *Tinyproxy) Stop() {
	p.mu.Lock()
	proc := p.proc
	p.proc = nil
	p.mu.Unlock()
	if proc != nil {
		proc.Stop()
	}
}

// Log is tinyproxy's log (one line per connection and CONNECT), for failure messages and for
// tests that check a connection went through the proxy.
func (p *Tinyproxy) Log() string { return childproc.LogSince(p.logPath, 0) }

// tinyproxyConf is tinyproxy's configuration: loopback clients only, and no ConnectPort line,
// which lets CONNECT reach every port (tinyproxy.conf(5)).
func tinyproxyConf(port, timeoutSeconds int, logPath string) string {
	return strings.Join([]string{
		"Listen 127.0.0.1",
		fmt.Sprintf("Port %d", port),
		"Allow 127.0.0.1",
		fmt.Sprintf("Timeout %d", timeoutSeconds),
		"MaxClients 100",
		fmt.Sprintf("LogFile %q", logPath),
		"LogLevel Info",
		"",
	}, "\n")
}
