package proxytest

import (
	"fmt"
	"github.com/better-compute/better-compute/internal/childproc"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// NginxOptions says what StartNginx proxies and with which certificate.
type NginxOptions struct {
	// Upstream is the host:port of the plain-HTTP (WebSocket) server nginx proxies to.
	Upstream string
	// Path is the location proxied, as "/daemon"; requests outside it get nginx's 404.
	Path string
	// CertPEM and KeyPEM are the certificate (chain) and key nginx terminates TLS with; clients
	// must trust its issuer and it must name 127.0.0.1.
	CertPEM, KeyPEM []byte
}

// Nginx is an nginx terminating TLS on a loopback port and proxying Path, WebSocket upgrades
// included, to Upstream, as a load balancer in front of a gateway would. Its methods are safe
// for concurrent use.
type Nginx struct {
	t       testing.TB
	bin     string
	conf    string
	logPath string
	port    int

	mu   sync.Mutex
	proc *childproc.Process
}

// StartNginx starts nginx with o until the test ends. It skips the test when nginx is not
// installed (unless RequireEnv is set) and fails it when nginx does not start.
func StartNginx(t testing.TB, o NginxOptions) *Nginx {
	t.Helper()
	bin := lookBinary(t, "nginx", "nginx-light", "/usr/sbin", "/usr/local/sbin")
	if o.Upstream == "" || !strings.HasPrefix(o.Path, "/") || len(o.CertPEM) == 0 || len(o.KeyPEM) == 0 {
		t.Fatalf("proxytest: StartNginx needs Upstream, a Path starting with / and a certificate, got %+v", o)
	}
	dir := t.TempDir()
	n := &Nginx{t: t, bin: bin, conf: filepath.Join(dir, "nginx.conf"), logPath: filepath.Join(dir, "error.log")}
	files := map[string][]byte{"cert.pem": o.CertPEM, "key.pem": o.KeyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatalf("proxytest: writing nginx's %s: %v", name, err)
		}
	}
	for _, sub := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		if err := os.Mkdir(filepath.Join(dir, "tmp-"+sub), 0o700); err != nil {
			t.Fatalf("proxytest: nginx's temporary directory: %v", err)
		}
	}
	t.Cleanup(n.Stop)
	for attempt := 1; ; attempt++ {
		n.port = freePort(t)
		if err := os.WriteFile(n.conf, []byte(nginxConf(dir, n.port, o)), 0o600); err != nil {
			t.Fatalf("proxytest: writing nginx.conf: %v", err)
		}
		failed := n.start()
		if failed == "" {
			return n
		}
		if attempt == bindAttempts || !strings.Contains(failed, "Address already in use") {
			t.Fatalf("proxytest: nginx exited:\n%s", failed)
		}
	}
}

// start runs nginx on n.port and returns "" once it accepts connections, or what it logged when
// it exited instead.
func (n *Nginx) start() string {
	n.t.Helper()
	dir := filepath.Dir(n.conf)
	p, failed := launch(n.t, "nginx", n.Addr(), n.logPath, func() (*childproc.Process, error) {
		return childproc.Start(n.bin, []string{"-p", dir + "/", "-c", n.conf, "-e", n.logPath}, nil, n.logPath)
	})
	if p != nil {
		n.mu.Lock()
		n.proc = p
		n.mu.Unlock()
	}
	return failed
}

// Addr is nginx's address, "127.0.0.1:port"; it stays the same across Restart.
func (n *Nginx) Addr() string { return loopback(n.port) }

// URL is the wss:// URL of path on nginx.
func (n *Nginx) URL(path string) string { return "wss://" + n.Addr() + path }

// Stop stops nginx and waits until it has exited, closing the connections it proxies. Stopping
// a stopped nginx does nothing.
func (n *Nginx) Stop() {
	n.mu.Lock()
	p := n.proc
	n.proc = nil
	n.mu.Unlock()
	if p != nil {
		p.Stop()
	}
}

// Restart stops nginx and starts it again on the same port, returning once it accepts
// connections: connections through the old nginx end, new ones reach the upstream again, as
// when a load balancer is redeployed. Call it from the test's goroutine (it fails the test).
func (n *Nginx) Restart() {
	n.t.Helper()
	n.Stop()
	// nginx itself retries a busy port for 2.5s; the port was just freed, so once more is plenty.
	for attempt := 1; ; attempt++ {
		failed := n.start()
		if failed == "" {
			return
		}
		if attempt == 2 || !strings.Contains(failed, "Address already in use") {
			n.t.Fatalf("proxytest: nginx exited on restart:\n%s", failed)
		}
	}
}

// Log is nginx's error log since it was first started, for failure messages.
func (n *Nginx) Log() string { return childproc.LogSince(n.logPath, 0) }

// nginxConf is nginx's configuration: one TLS server on port proxying o.Path to o.Upstream with
// WebSocket upgrades passed through and no timeout or buffering in the way of a long-lived
// connection, every file it writes under dir.
func nginxConf(dir string, port int, o NginxOptions) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("daemon off;")
	w("master_process on;")
	w("worker_processes 1;")
	if os.Geteuid() == 0 {
		// Workers otherwise run as nobody, who cannot enter the test's temporary directory.
		w("user root;")
	}
	w("pid %s;", filepath.Join(dir, "nginx.pid"))
	w("error_log %s info;", filepath.Join(dir, "error.log"))
	w("events { worker_connections 256; }")
	w("http {")
	w("  access_log %s;", filepath.Join(dir, "access.log"))
	for _, sub := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		w("  %s_temp_path %s;", sub, filepath.Join(dir, "tmp-"+sub))
	}
	w("  map $http_upgrade $connection_upgrade { default upgrade; '' close; }")
	w("  server {")
	w("    listen 127.0.0.1:%s ssl;", strconv.Itoa(port))
	w("    ssl_certificate %s;", filepath.Join(dir, "cert.pem"))
	w("    ssl_certificate_key %s;", filepath.Join(dir, "key.pem"))
	w("    location %s {", o.Path)
	w("      proxy_pass http://%s;", o.Upstream)
	w("      proxy_http_version 1.1;")
	w("      proxy_set_header Upgrade $http_upgrade;")
	w("      proxy_set_header Connection $connection_upgrade;")
	w("      proxy_set_header Host $host;")
	w("      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;")
	w("      proxy_set_header X-Forwarded-Proto https;")
	w("      proxy_read_timeout 1h;")
	w("      proxy_send_timeout 1h;")
	w("      proxy_buffering off;")
	w("    }")
	w("  }")
	w("}")
	return b.String()
}
