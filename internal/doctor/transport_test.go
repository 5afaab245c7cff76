package doctor_test

import (
	"testing"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/fleet"
)

// TestReportsSessionTransports: the sessions by transport, in all and per gateway, always OK.
func TestReportsSessionTransports(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	fs, err := doctor.Run(ctx, doctor.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if f := find(t, fs, "session transports"); f.Severity != doctor.OK || f.Cause != "0 sessions: 0 direct (h2), 0 over WebSocket" {
		t.Errorf("without sessions: %+v", f)
	}

	nodes := capacitytest.Nodes(t, pool, capacitytest.RootTenant(t, pool), 4, capacitytest.NodeSpec{CPUs: 1})
	for i, s := range []struct {
		gateway   string
		transport fleet.Transport
	}{{"gw-a", fleet.TransportH2}, {"gw-a", fleet.TransportWebSocket}, {"gw-b", fleet.TransportWebSocket}, {"gw-b", fleet.TransportWebSocket}} {
		if err := db.New(pool).ClaimSession(ctx, db.ClaimSessionParams{NodeID: nodes[i], GatewayID: s.gateway, SessionID: "s", Transport: string(s.transport)}); err != nil {
			t.Fatal(err)
		}
	}
	fs, err = doctor.Run(ctx, doctor.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	want := "4 sessions: 1 direct (h2), 3 over WebSocket; by gateway: gw-a 1 h2, 1 websocket; gw-b 0 h2, 2 websocket"
	if f := find(t, fs, "session transports"); f.Severity != doctor.OK || f.Cause != want {
		t.Errorf("got %+v, want OK %q", f, want)
	}
}
