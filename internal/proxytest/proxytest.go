// Package proxytest runs real proxies for tests of clients that must work behind them: nginx
// terminating TLS and proxying WebSocket upgrades to a plain-HTTP server (a gateway behind a
// load balancer on port 443), and tinyproxy as an HTTPS CONNECT proxy (a daemon behind
// HTTPS_PROXY). Each runs in the foreground on a free loopback port with all its files in the
// test's temporary directory, and is stopped when the test ends.
//
// A test is skipped when the proxy's binary is missing (scripts/setup installs it), unless
// BETTER_COMPUTE_REQUIRE_PROXIES=1 is set, as CI does, when it fails instead.
package proxytest

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// RequireEnv is the environment variable that, set to 1, makes a missing proxy binary fail the
// test instead of skipping it, so CI cannot pass by silently skipping the proxy tests.
const RequireEnv = "BETTER_COMPUTE_REQUIRE_PROXIES"

// startTimeout bounds how long a proxy may take to listen (nginx alone retries a busy port for
// 2.5s before giving up).
const startTimeout = 30 * time.Second

// bindAttempts is how many ports a proxy is started on before a failed bind fails the test: the
// port is chosen free, then bound by the proxy, and another process may take it in between.
const bindAttempts = 3

// lookBinary returns the path of the named program, searching PATH and then dirs (sbin is not
// on every user's PATH). A missing program skips the test with how to install it, or fails it
// when RequireEnv is set.
func lookBinary(t testing.TB, name, pkg string, dirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := d + "/" + name
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	msg := name + " is not installed: apt-get install " + pkg + ", as scripts/setup does"
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%s (%s=1 requires it)", msg, RequireEnv)
	}
	t.Skip(msg)
	return ""
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxytest: choosing a free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// accepts reports whether something accepts TCP connections on addr.
func accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
