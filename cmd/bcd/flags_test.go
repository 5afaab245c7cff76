package main

import (
	"bytes"
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
