package tunnels_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/internal/poll"
)

// TestSSHThroughStdio: ssh reaches a real sshd on the node's loopback with the CLI as its
// ProxyCommand (`better-compute tunnel --node %h --port P --stdio`), logs in with a key and runs
// a command.
func TestSSHThroughStdio(t *testing.T) {
	t.Parallel()
	sshd := startSSHD(t)
	cli := buildCLI(t)
	e := newEnv(t, false)
	n := e.startFake(fakeOptions{tunnelPorts: []int{sshd.port}})
	e.allow(n, sshd.port)

	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	proxy := cli + " tunnel --node %h --port " + strconv.Itoa(sshd.port) + " --stdio"
	cmd := exec.CommandContext(cctx, "ssh", append(sshd.clientArgs(), "-o", "ProxyCommand="+proxy,
		sshd.user+"@"+n.id, "echo", "hello-through-tunnel")...)
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_URL="+e.api.URL, "BETTER_COMPUTE_API_KEY="+e.api.AdminKey)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("ssh through the tunnel: %v\nstderr:\n%s\nsshd log:\n%s", err, stderr.String(), sshd.log())
	}
	if got := stdout.String(); got != "hello-through-tunnel\n" {
		t.Fatalf("ssh printed %q; stderr:\n%s", got, stderr.String())
	}
	var ids []string
	rows, err := e.Pool.Query(ctx, `SELECT id::text FROM tunnels WHERE node_id = $1 AND opened_at IS NOT NULL`, n.id)
	if err == nil {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(ids) != 1 {
		t.Fatalf("tunnels opened to the node: %v (%v), want one", ids, err)
	}
	poll.Until(t, 60*time.Second, "the tunnel's end is recorded", func() bool { return e.row(ids[0]).closed })
	t.Logf("the tunnel ended with close code %d", e.row(ids[0]).code)
}

// sshd is OpenSSH's server, run by the test as the current user on a loopback port, with its own
// host key and one authorized client key.
type sshd struct {
	port    int
	user    string
	key     string // the client's private key file
	logFile string
}

// startSSHD starts sshd until the test ends; the test is skipped when OpenSSH's server or client
// is not installed (scripts/setup installs them).
func startSSHD(t testing.TB) *sshd {
	t.Helper()
	const bin = "/usr/sbin/sshd"
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("OpenSSH's server is not installed (%v): apt-get install openssh-server, as scripts/setup does", err)
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skipf("OpenSSH's client is not installed: %v", err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// sshd started by root separates privileges and insists on this empty directory, which
		// the service manager creates for a system's sshd.
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	s := &sshd{user: u.Username, key: filepath.Join(dir, "id_ed25519"), logFile: filepath.Join(dir, "sshd.log")}
	hostKey := filepath.Join(dir, "host_ed25519")
	for _, k := range []string{hostKey, s.key} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tunnel-test", "-f", k).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(s.key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	authorized := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(authorized, pub, 0o600); err != nil {
		t.Fatal(err)
	}
	// The port is chosen free, then bound by sshd: another process may take it between the
	// two, so a failed bind is retried on another.
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		config := filepath.Join(dir, "sshd_config")
		if err := os.WriteFile(config, []byte(strings.Join([]string{
			"ListenAddress 127.0.0.1:" + strconv.Itoa(s.port),
			"HostKey " + hostKey,
			"AuthorizedKeysFile " + authorized,
			"PidFile none",
			"UsePAM no",
			"StrictModes no",
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"PermitRootLogin prohibit-password",
			"",
		}, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(s.logFile)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-D", "-e", "-f", config)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_ = logf.Close()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := sync.OnceFunc(func() { _ = cmd.Process.Kill(); <-exited })
		t.Cleanup(stop)
		listening := false
		poll.Until(t, 60*time.Second, "sshd listens or exits", func() bool {
			select {
			case <-exited:
				return true
			default:
			}
			listening = strings.Contains(s.log(), "Server listening on")
			return listening
		}, poll.Report(s.log))
		if listening {
			return s
		}
		stop()
		if attempt == 2 || !strings.Contains(s.log(), "Address already in use") {
			t.Fatalf("sshd exited:\n%s", s.log())
		}
	}
}

func (s *sshd) log() string {
	b, _ := os.ReadFile(s.logFile)
	return string(b)
}

// clientArgs are the options of an ssh client of this server: its key, no configuration files,
// no prompts, and no record of the host key.
func (s *sshd) clientArgs() []string {
	return []string{"-F", "/dev/null", "-i", s.key, "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR"}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// buildCLI builds the better-compute command into the test's temporary directory (with the
// race detector when the test has it) and returns its path.
func buildCLI(t testing.TB) string {
	t.Helper()
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go") //nolint:staticcheck // the toolchain running the test builds the CLI
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out := filepath.Join(t.TempDir(), "better-compute")
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	start := time.Now()
	if b, err := exec.Command(goBin, append(args, "github.com/better-compute/better-compute/cmd/better-compute")...).CombinedOutput(); err != nil {
		t.Fatalf("go build better-compute: %v\n%s", err, b)
	}
	t.Logf("built better-compute in %v", time.Since(start).Round(time.Millisecond))
	return out
}
