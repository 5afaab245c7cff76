package host_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/daemon/host"
)

// TestStatusShowsTheTransport: bcd status says how a connected daemon reaches its gateway.
func TestStatusShowsTheTransport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    host.Status
		want string
	}{
		{host.Status{Running: true, Connected: true, Sessions: 1, Transport: "websocket"}, "), connected via websocket, 1 sessions"},
		{host.Status{Running: true, Connected: true, Sessions: 2, Transport: "h2"}, "), connected via h2, 2 sessions"},
		{host.Status{Running: true, Transport: "h2"}, "), not connected, 0 sessions"},
	} {
		var out bytes.Buffer
		tc.s.Format(&out)
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("bcd status:\n%s\nwant %q", out.String(), tc.want)
		}
	}
}
