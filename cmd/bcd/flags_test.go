package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTunnelPortFlag: bcd run takes its tunnel allow list from --tunnel-port, repeated or comma
// separated, empty by default, documented in its help; a port out of range stops it before it
// reads the state directory.
func TestTunnelPortFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want []int
		ok   bool
	}{
		{nil, []int{}, true},
		{[]string{"--tunnel-port", "22"}, []int{22}, true},
		{[]string{"--tunnel-port", "22,8888", "--tunnel-port=9000"}, []int{22, 8888, 9000}, true},
		{[]string{"--tunnel-port", "ssh"}, nil, false},
	} {
		cmd := newRunCommand(&globals{})
		err := cmd.ParseFlags(tc.args)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if !tc.ok {
			continue
		}
		got, err := cmd.Flags().GetIntSlice("tunnel-port")
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: tunnel ports %v (%v), want %v", tc.args, got, err, tc.want)
		}
	}

	var help bytes.Buffer
	root := newRootCommand()
	root.SetOut(&help)
	root.SetArgs([]string{"run", "--help"})
	if err := root.Execute(); err != nil || !strings.Contains(help.String(), "--tunnel-port") {
		t.Errorf("bcd run --help (%v):\n%s", err, help.String())
	}

	root = newRootCommand()
	root.SetArgs([]string{"--state-dir", t.TempDir(), "--log-level", "error", "run", "--tunnel-port", "22,70000"})
	if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "--tunnel-port: tunnel port 70000") {
		t.Errorf("bcd run --tunnel-port 22,70000: %v", err)
	}
}

// TestReleaseFlags: bcd run takes --release-url, --release-key (repeated, a path with a comma
// kept whole) and --upgrade-deadline (2m by default), all in its help; either release flag
// without the other, or a deadline out of range, stops it before it reads the state directory,
// naming the flag. --allow-upgrade and --upgrade-source are gone.
func TestReleaseFlags(t *testing.T) {
	t.Parallel()
	cmd := newRunCommand(&globals{})
	if err := cmd.ParseFlags([]string{"--release-key", "/etc/bcd/a,b.pub", "--release-key=/etc/bcd/c.pub"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := cmd.Flags().GetStringArray("release-key"); !slices.Equal(got, []string{"/etc/bcd/a,b.pub", "/etc/bcd/c.pub"}) {
		t.Errorf("release keys %q", got)
	}
	if d, _ := cmd.Flags().GetDuration("upgrade-deadline"); d.String() != "2m0s" {
		t.Errorf("default --upgrade-deadline %v", d)
	}
	for _, gone := range []string{"--allow-upgrade", "--upgrade-source=https://x/"} {
		if err := newRunCommand(&globals{}).ParseFlags([]string{gone}); err == nil {
			t.Errorf("%s is still accepted", gone)
		}
	}

	var help bytes.Buffer
	root := newRootCommand()
	root.SetOut(&help)
	root.SetArgs([]string{"run", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--release-url", "--release-key", "--upgrade-deadline", "SHA256SUMS.minisig", "refuses exec only"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("bcd run --help does not mention %s:\n%s", want, help.String())
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--release-url", "https://releases.example.com/bc"}, "--release-url needs at least one --release-key"},
		{[]string{"--release-key", "/etc/bcd/release.pub"}, "--release-key needs --release-url"},
		{[]string{"--upgrade-deadline", "10ms"}, "--upgrade-deadline 10ms"},
	} {
		root := newRootCommand()
		root.SetArgs(append([]string{"--state-dir", t.TempDir(), "--log-level", "error", "run"}, tc.args...))
		if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bcd run %q: %v; want %q", tc.args, err, tc.want)
		}
	}
}

// TestTransportFlags: join and run document --transport, --websocket-url and
// --websocket-ca-file; a transport other than auto, h2 or websocket stops run before it reads
// the state directory, naming the flag.
func TestTransportFlags(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"join", "run"} {
		var help bytes.Buffer
		root := newRootCommand()
		root.SetOut(&help)
		root.SetArgs([]string{sub, "--help"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"--transport", "--websocket-url", "--websocket-ca-file", "HTTPS_PROXY"} {
			if !strings.Contains(help.String(), flag) {
				t.Errorf("bcd %s --help does not mention %s", sub, flag)
			}
		}
	}
	root := newRootCommand()
	root.SetArgs([]string{"--state-dir", t.TempDir(), "--log-level", "error", "run", "--transport", "quic"})
	if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), `--transport: transport "quic"`) {
		t.Errorf("bcd run --transport quic: %v", err)
	}
}

// TestJoinRefusesWithoutTrust: bcd join with neither --ca-file nor --ca-cert-hash refuses before
// it dials or writes anything (it once trusted the system's roots, so a node could not join a
// production deployment without a file only dev wrote), and a pin that is not sha256:<64 hex>
// is refused naming the flag.
func TestJoinRefusesWithoutTrust(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "join needs the deployment's root CA to check the gateway: --ca-cert-hash sha256:"},
		{[]string{"--ca-cert-hash", "abcd"}, "--ca-cert-hash: CA certificate hash \"abcd\": want sha256:<64 hex digits>"},
	} {
		stateDir := filepath.Join(t.TempDir(), "state")
		root := newRootCommand()
		root.SetArgs(append([]string{"--state-dir", stateDir, "join", "--token", "bcj_x_y", "--gateway", "127.0.0.1:1"}, tc.args...))
		if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bcd join %q: %v; want %q", tc.args, err, tc.want)
		}
		if _, err := os.Lstat(stateDir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("bcd join %q left a state directory: %v", tc.args, err)
		}
	}
	var help bytes.Buffer
	root := newRootCommand()
	root.SetOut(&help)
	root.SetArgs([]string{"join", "--help"})
	if err := root.Execute(); err != nil || !strings.Contains(help.String(), "--ca-cert-hash") || !strings.Contains(help.String(), "pki export-root") {
		t.Errorf("bcd join --help (%v):\n%s", err, help.String())
	}
}

// TestGPUHealthIntervalFlag: bcd run takes --gpu-health-interval, 30s by default; one out of
// range stops it before it reads the state directory, naming the flag.
func TestGPUHealthIntervalFlag(t *testing.T) {
	t.Parallel()
	if d, _ := newRunCommand(&globals{}).Flags().GetDuration("gpu-health-interval"); d.String() != "30s" {
		t.Errorf("default --gpu-health-interval %v", d)
	}
	for _, v := range []string{"10ms", "2h"} {
		root := newRootCommand()
		root.SetArgs([]string{"--state-dir", t.TempDir(), "--log-level", "error", "run", "--gpu-health-interval", v})
		if err := root.ExecuteContext(t.Context()); err == nil || !strings.Contains(err.Error(), "--gpu-health-interval") {
			t.Errorf("bcd run --gpu-health-interval %s: %v", v, err)
		}
	}
}

// TestGPUUsageFlags: bcd run takes --gpu-usage-interval, 5s by default, and --gpu-metrics-listen,
// off by default; an interval out of range, or the endpoint without sampling, stops it before it
// reads the state directory, naming the flag.
func TestGPUUsageFlags(t *testing.T) {
	t.Parallel()
	flags := newRunCommand(&globals{}).Flags()
	if d, _ := flags.GetDuration("gpu-usage-interval"); d.String() != "5s" {
		t.Errorf("default --gpu-usage-interval %v", d)
	}
	if a, _ := flags.GetString("gpu-metrics-listen"); a != "" {
		t.Errorf("default --gpu-metrics-listen %q", a)
	}
	for _, args := range [][]string{
		{"--gpu-usage-interval", "10ms"},
		{"--gpu-usage-interval", "2m"},
		{"--gpu-usage-interval", "0", "--gpu-metrics-listen", "127.0.0.1:0"},
	} {
		root := newRootCommand()
		root.SetArgs(append([]string{"--state-dir", t.TempDir(), "--log-level", "error", "run"}, args...))
		err := root.ExecuteContext(t.Context())
		if err == nil || !strings.Contains(err.Error(), "--gpu-") {
			t.Errorf("bcd run %v: %v", args, err)
		}
	}
}
