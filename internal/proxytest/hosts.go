package proxytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// LoopbackName is a name (under .test, reserved by RFC 2606) that HostsNamespace resolves to
// 127.0.0.1. Go's proxy environment never applies to "localhost" or a loopback address, but it
// does to a name: a test that must go through HTTPS_PROXY dials this name and stays on loopback.
const LoopbackName = "gw.bcd.test"

// HostsNamespace returns a command prefix that runs a program in a mount namespace of its own
// whose /etc/hosts resolves LoopbackName (and localhost) to 127.0.0.1: run it as
// exec.Command(prefix[0], append(prefix[1:], program, args...)...). The program keeps the
// host's network (loopback only is reached), its PID (the prefix execs it) and the rest of the
// file system; the host's /etc/hosts is untouched. It skips the test where mount namespaces are
// not allowed (not root, or no unshare).
func HostsNamespace(t testing.TB) []string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a private /etc/hosts needs a mount namespace, which needs root")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is not installed; it gives the test a private /etc/hosts")
	}
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost "+LoopbackName+"\n::1 localhost ip6-localhost\n"), 0o644); err != nil {
		t.Fatalf("proxytest: writing hosts: %v", err)
	}
	// --propagation private (unshare's default) keeps the bind mount inside the namespace.
	prefix := []string{unshare, "--mount", "--propagation", "private", "--", "/bin/sh", "-c", `mount --bind "$0" /etc/hosts && exec "$@"`, hosts}
	probe := exec.Command(prefix[0], append(prefix[1:], "/bin/sh", "-c", "grep -q "+LoopbackName+" /etc/hosts")...) //nolint:gosec // the test's own command
	if out, err := probe.CombinedOutput(); err != nil {
		t.Skipf("no mount namespace with a private /etc/hosts here: %v %s", err, strings.TrimSpace(string(out)))
	}
	return prefix
}
