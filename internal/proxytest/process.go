package proxytest

import (
	"github.com/better-compute/better-compute/internal/childproc"
	"testing"

	"github.com/better-compute/better-compute/internal/poll"
)

// launch starts a proxy with start and waits until it accepts connections on addr or exits.
// It returns the running process, or nil and what the proxy logged when it exited instead.
func launch(t testing.TB, what, addr, logPath string, start func() (*childproc.Process, error)) (*childproc.Process, string) {
	t.Helper()
	offset := childproc.FileSize(logPath)
	p, err := start()
	if err != nil {
		t.Fatalf("proxytest: %s: %v", what, err)
	}
	poll.Until(t, startTimeout, what+" listens on "+addr+" or exits", func() bool {
		return p.Done() || accepts(addr)
	}, poll.Report(func() string { return childproc.LogSince(logPath, 0) }))
	if p.Done() {
		return nil, childproc.LogSince(logPath, offset)
	}
	return p, ""
}
