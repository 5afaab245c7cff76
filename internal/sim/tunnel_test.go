package sim_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/sim"
	"github.com/better-compute/better-compute/internal/tunnelhop"
	"github.com/better-compute/better-compute/internal/tunnelhop/tunneltest"
)

// TestFleetTunnel streams tunnels to a simulated machine through a real gateway, as the API
// does: to a port on the machines' allow list the bytes go both ways, and each exchange takes at
// least the data plane's injected round trip; a port off the list is refused with 4003.
func TestFleetTunnel(t *testing.T) {
	t.Parallel()
	const rtt = 60 * time.Millisecond
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", nil)
	port := tunneltest.EchoPort(t, "")
	f := runFleet(t, sim.Options{
		Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: e.Token(1, time.Now().Add(time.Hour)), N: 1,
		TunnelPorts: []int{port}, TunnelRTT: rtt,
	})
	waitConnected(t, f)
	node := f.Machine(0).NodeID
	dialer, err := tunnelhop.NewDialer(e.Bundle)
	if err != nil {
		t.Fatal(err)
	}

	s, err := dialer.Dial(t.Context(), gw.ControlURL, uuid.NewString(), node, port)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		msg := []byte{'p', 'i', 'n', 'g', byte('0' + i)}
		start := time.Now()
		if err := s.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: msg}); err != nil {
			t.Fatal(err)
		}
		var got []byte
		for len(got) < len(msg) {
			fr, err := s.ReadFrame()
			if err != nil {
				t.Fatal(err)
			}
			if fr.Type != tunnel.Data {
				t.Fatalf("frame type %d, want data", fr.Type)
			}
			got = append(got, fr.Payload...)
		}
		if took := time.Since(start); !bytes.Equal(got, msg) || took < rtt {
			t.Fatalf("echo %q in %v, want %q after at least %v", got, took, msg, rtt)
		}
	}
	if err := s.WriteFrame(tunnel.Frame{Type: tunnel.CloseWrite}); err != nil {
		t.Fatal(err)
	}
	if fr, err := s.ReadFrame(); err != nil || fr.Type != tunnel.CloseWrite {
		t.Fatalf("after the half-close: frame %v, %v; want a close-write", fr.Type, err)
	}

	refused, err := dialer.Dial(t.Context(), gw.ControlURL, uuid.NewString(), node, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	fr, err := refused.ReadFrame()
	if err != nil || fr.Type != tunnel.Abort {
		t.Fatalf("a port off the allow list: frame %v, %v; want an abort", fr.Type, err)
	}
	if code, reason := tunnel.ParseAbort(fr.Payload); code != tunnel.CodePortRefused {
		t.Fatalf("abort %d %q, want 4003", code, reason)
	}
	if _, err := refused.ReadFrame(); !errors.Is(err, io.EOF) {
		t.Errorf("after the abort: %v, want the end of the stream", err)
	}
}
