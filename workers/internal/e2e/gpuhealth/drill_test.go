// Package gpuhealth_test runs the GPU health drill end to end: FakeDaemons with eight GPUs each,
// joined through a real gateway, the health reconciler and the capacity placer on the worker
// runtime, and the API in front.
package gpuhealth_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gateway"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1/gpusv1connect"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers/internal/engine"
	"github.com/better-compute/better-compute/workers/internal/gpucontrol"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// dgx is an inventory with eight H100s, as a DGX H100 reports them.
func dgx(host string) *daemonv1.Inventory {
	inv := &daemonv1.Inventory{Hostname: host, Cpus: 224, MemoryBytes: 2 << 40}
	buses := []int{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}
	for i, bus := range buses {
		numa := int32(i / 4)
		inv.Gpus = append(inv.Gpus, &daemonv1.Gpu{
			Index: int32(i), Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30,
			Uuid: fmt.Sprintf("GPU-%s-%d", host, i), Serial: fmt.Sprintf("16529220%05d", i),
			PciBusId: fmt.Sprintf("00000000:%02X:00.0", bus), NumaNode: &numa,
		})
	}
	return inv
}

// drill is the running system of the test.
type drill struct {
	sys    *system
	env    *servertest.Env
	leases leasesv1connect.LeasesServiceClient
	gpus   gpusv1connect.GpusServiceClient
	pool   string
	fakes  map[string]*daemon.Fake
}

// system is the control plane of a test: the API, a gateway on loopback TLS and the worker
// pieces, with a join token for the machines.
type system struct {
	env     *servertest.Env
	gateway string
	rootPEM []byte
	token   string
	ctx     context.Context
	wg      *sync.WaitGroup
	// stopControllers stops the process running the controllers role, for a test that runs
	// its own.
	stopControllers func()
}

// newSystem starts the API, the health reconciler (controllers) and the placer (scheduler),
// woken in-process by the gateway as a deployment's waker wakes them, the liveness job, and a
// gateway; its join token admits machines machines labelled gpu=h100.
func newSystem(t testing.TB, machines int) *system {
	t.Helper()
	return newSystemWith(t, machines, nil)
}

// controllers is what a process of the controllers role runs: the health reconciler, the
// liveness job (nodes are schedulable once online, which it records from their hellos) and
// more, made with the process's waker.
func controllers(pool *pgxpool.Pool, poke func(kind string), more func(pool *pgxpool.Pool, poke func(kind string)) []reconcile.Registration) engine.Options {
	regs := []reconcile.Registration{gpucontrol.Registration(pool, gpucontrol.Options{Wake: poke})}
	if more != nil {
		regs = append(regs, more(pool, poke)...)
	}
	return engine.Options{
		Pool: pool, Roles: map[string]bool{reconcile.RoleControllers: true}, Reconcilers: regs,
		Jobs: map[string][]locks.Job{reconcile.RoleControllers: {nodecontrol.LivenessJob(pool, nodecontrol.LivenessOptions{
			Interval: 100 * time.Millisecond, Threshold: time.Minute,
		})}},
	}
}

// newSystemWith is newSystem with more reconcilers of the controllers role, made with the
// system's waker. The controllers and the scheduler run as two processes would.
func newSystemWith(t testing.TB, machines int, more func(pool *pgxpool.Pool, poke func(kind string)) []reconcile.Registration) *system {
	t.Helper()
	env := servertest.New(t)
	var ctl, sched *engine.Runtime
	poke := func(kind string) {
		ctl.Reconcilers().Poke(kind)
		sched.Reconcilers().Poke(kind)
	}
	ctl = engine.New(controllers(env.Pool, poke, more))
	sched = engine.New(engine.Options{
		Pool: env.Pool, Roles: map[string]bool{reconcile.RoleScheduler: true},
		Reconcilers: []reconcile.Registration{placer.Registration(env.Pool, placer.Options{})},
	})
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sched.Run(rctx) })
	cctx, stopCtl := context.WithCancel(rctx)
	ctlDone := make(chan struct{})
	wg.Go(func() { defer close(ctlDone); ctl.Run(cctx) })
	t.Cleanup(func() { stop(); wg.Wait() })

	bundle, err := pki.Init(ctx, env.Pool, "gpu-drill-secret-0123456789abcdef", "test.local")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := bundle.IssueGateway("test", "gw1", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gw := gateway.New(gateway.Options{
		Pool: env.Pool, Authority: bundle, ID: "gw1", Region: "test", Certificate: cert,
		HeartbeatInterval: time.Second, DispatchInterval: 100 * time.Millisecond, Wake: poke,
	})
	wg.Go(func() {
		if err := gw.Serve(rctx, ln); err != nil {
			t.Errorf("gateway: %v", err)
		}
	})
	tok, err := jointokensv1connect.NewJoinTokensServiceClient(env.HTTPClient(env.AdminKey), env.URL).Create(ctx, &jointokensv1.CreateRequest{
		Labels: map[string]string{"gpu": "h100"}, MaxUses: int32(machines),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &system{
		env: env, gateway: ln.Addr().String(), rootPEM: bundle.RootPEM(), token: tok.GetToken(), ctx: rctx, wg: &wg,
		stopControllers: func() { stopCtl(); <-ctlDone },
	}
}

func newDrill(t *testing.T, hosts ...string) *drill {
	t.Helper()
	return newDrillWith(t, nil, hosts...)
}

// newDrillWith is newDrill on newSystemWith.
func newDrillWith(t *testing.T, more func(pool *pgxpool.Pool, poke func(kind string)) []reconcile.Registration, hosts ...string) *drill {
	t.Helper()
	return newDrillOpts(t, more, nil, hosts...)
}

// newDrillOpts is newDrillWith whose FakeDaemons' options fakeOpts may change (nil: none).
func newDrillOpts(t *testing.T, more func(pool *pgxpool.Pool, poke func(kind string)) []reconcile.Registration,
	fakeOpts func(*daemon.FakeOptions), hosts ...string) *drill {
	t.Helper()
	sys := newSystemWith(t, len(hosts), more)
	env := sys.env
	d := &drill{
		sys:    sys,
		env:    env,
		leases: leasesv1connect.NewLeasesServiceClient(env.HTTPClient(env.AdminKey), env.URL),
		gpus:   gpusv1connect.NewGpusServiceClient(env.HTTPClient(env.AdminKey), env.URL),
		fakes:  map[string]*daemon.Fake{},
	}
	for _, host := range hosts {
		opts := daemon.FakeOptions{Dialer: daemon.Dialer{Gateway: sys.gateway}, Inventory: dgx(host)}
		if fakeOpts != nil {
			fakeOpts(&opts)
		}
		fake, err := daemon.JoinFake(ctx, sys.rootPEM, sys.token, host, opts)
		if err != nil {
			t.Fatal(err)
		}
		sys.wg.Go(func() { _ = fake.Run(sys.ctx) })
		d.fakes[host] = fake
	}
	poll.Until(t, 20*time.Second, "the nodes are ready and online with their GPUs", func() bool {
		return d.count(t, `SELECT count(*) FROM nodes n JOIN devices g ON g.node_id = n.id AND g.present WHERE n.state = 'ready' AND n.online`) == 8*len(hosts)
	})
	res, err := poolsv1connect.NewPoolsServiceClient(env.HTTPClient(env.AdminKey), env.URL).Create(ctx, &poolsv1.CreateRequest{
		Name: "h100", NodeSelector: map[string]string{"gpu": "h100"},
	})
	if err != nil {
		t.Fatal(err)
	}
	d.pool = res.GetPool().GetId()
	return d
}

func (d *drill) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return count(t, d.env, sql, args...)
}

func (s *system) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	return count(t, s.env, sql, args...)
}

func count(t testing.TB, env *servertest.Env, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// lease creates a lease of n GPUs and waits until it is placed; it returns the lease.
func (d *drill) lease(t *testing.T, n int) *leasesv1.Lease {
	t.Helper()
	created, err := d.leases.Create(ctx, &leasesv1.CreateRequest{PoolId: d.pool, Gpus: int32(n), Duration: durationpb.New(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	var l *leasesv1.Lease
	poll.Until(t, 10*time.Second, fmt.Sprintf("a lease of %d GPUs is placed", n), func() bool {
		res, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: created.GetLease().GetId()})
		if err != nil {
			t.Fatal(err)
		}
		l = res.GetLease()
		return l.GetState() == leasesv1.LeaseState_LEASE_STATE_PLACED
	})
	return l
}

func (d *drill) release(t *testing.T, l *leasesv1.Lease) {
	t.Helper()
	if _, err := d.leases.Release(ctx, &leasesv1.ReleaseRequest{Id: l.GetId()}); err != nil {
		t.Fatal(err)
	}
}

func (d *drill) gpu(t *testing.T, uuid string) *gpusv1.Gpu {
	t.Helper()
	res, err := d.gpus.Get(ctx, &gpusv1.GetRequest{Uuid: uuid})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetGpu()
}

// hostOf is the host whose GPUs a lease holds (one, for the leases of this test).
func hostOf(t *testing.T, l *leasesv1.Lease) string {
	t.Helper()
	var hosts []string
	for _, a := range l.GetAllocations() {
		if h := a.GetHostname(); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) != 1 {
		t.Fatalf("lease %s holds GPUs on %v", l.GetId(), hosts)
	}
	return hosts[0]
}

func holds(l *leasesv1.Lease, gpuUUID string) bool {
	return slices.ContainsFunc(l.GetAllocations(), func(a *leasesv1.Allocation) bool { return a.GetGpuUuid() == gpuUUID })
}

// TestXid79Drill: an Xid 79 on GPU 3 of an eight-GPU node quarantines that GPU within 2 s; an
// eight-GPU lease then goes to the other node, a seven-GPU lease still lands on the first
// without GPU 3, and the lease that held GPU 3 is told. Application Xids change nothing; a
// clear makes GPU 3 placeable again.
func TestXid79Drill(t *testing.T) {
	t.Parallel()
	d := newDrill(t, "dgx-a", "dgx-b")
	first := d.lease(t, 8)
	host := hostOf(t, first)
	other := map[string]string{"dgx-a": "dgx-b", "dgx-b": "dgx-a"}[host]
	gpu3 := fmt.Sprintf("GPU-%s-3", host)
	fake := d.fakes[host]
	inject := func(code int64) {
		now := timestamppb.Now()
		if err := fake.InjectGPUSignal(&daemonv1.GpuSignal{
			GpuUuid: gpu3, PciBusId: "0000:5d:00", Check: gpuhealth.CheckXid, Code: code, Count: 1, FirstSeen: now, LastSeen: now,
			Detail: fmt.Sprintf("NVRM: Xid (PCI:0000:5d:00): %d, pid=4242, name=python", code),
		}); err != nil {
			t.Fatal(err)
		}
	}

	// Application Xids: the report is stored and reconciled, and the GPU stays healthy.
	inject(13)
	inject(43)
	poll.Until(t, 10*time.Second, "the application Xids are reported and reconciled", func() bool {
		return d.count(t, `SELECT count(*) FROM node_gpu_health h JOIN nodes n ON n.id = h.node_id
			WHERE n.hostname = $1 AND jsonb_array_length(h.report -> 'signals') = 2`, host) == 1 &&
			d.count(t, `SELECT count(*) FROM reconcile_queue WHERE kind = $1 AND due_at <= now()`, gpuhealth.ReconcileKind) == 0
	})
	if g := d.gpu(t, gpu3); g.GetHealth() != gpusv1.HealthState_HEALTH_STATE_HEALTHY || len(g.GetReasons()) != 0 {
		t.Fatalf("after application Xids: %v", g)
	}

	// Xid 79: unhealthy within 2 s.
	start := time.Now()
	inject(79)
	took := poll.Until(t, 10*time.Second, "GPU 3 is unhealthy", func() bool {
		return d.count(t, `SELECT count(*) FROM devices WHERE uuid = $1 AND health = 'unhealthy'`, gpu3) == 1
	})
	if took > 2*time.Second {
		t.Errorf("GPU 3 unhealthy %v after the Xid 79, want within 2s", took)
	}
	t.Logf("Xid 79 to quarantine: %v", time.Since(start))
	g := d.gpu(t, gpu3)
	if g.GetHealth() != gpusv1.HealthState_HEALTH_STATE_UNHEALTHY || len(g.GetReasons()) != 1 || g.GetReasons()[0].GetCode() != 79 ||
		g.GetReasons()[0].GetEffect() != string(gpuhealth.EffectQuarantineGPU) || g.GetLeaseId() != first.GetId() {
		t.Fatalf("after Xid 79: %v", g)
	}
	// The holder of GPU 3 is told, once; the GPU's own event is out too.
	if n := d.count(t, `SELECT count(*) FROM outbox WHERE type = 'lease.gpu_unhealthy' AND subject = $1 AND payload->>'gpuUuid' = $2`,
		"lease/"+first.GetId(), gpu3); n != 1 {
		t.Errorf("%d lease.gpu_unhealthy events for the holder, want 1", n)
	}
	if n := d.count(t, `SELECT count(*) FROM outbox WHERE type = 'gpu.unhealthy' AND subject = $1`, "gpu/"+gpu3); n != 1 {
		t.Errorf("%d gpu.unhealthy events, want 1", n)
	}

	// With the first lease released, an eight-GPU lease goes to the other node, and a seven-GPU
	// lease still lands on this one, without GPU 3.
	d.release(t, first)
	eight := d.lease(t, 8)
	if h := hostOf(t, eight); h != other {
		t.Fatalf("the eight-GPU lease went to %s, want %s", h, other)
	}
	seven := d.lease(t, 7)
	if h := hostOf(t, seven); h != host || holds(seven, gpu3) {
		t.Fatalf("the seven-GPU lease: %v", seven.GetAllocations())
	}

	// A clear makes GPU 3 placeable again: a one-GPU lease takes it, the only GPU left.
	if _, err := d.gpus.Clear(ctx, &gpusv1.ClearRequest{Uuid: gpu3}); err != nil {
		t.Fatal(err)
	}
	if g := d.gpu(t, gpu3); g.GetHealth() != gpusv1.HealthState_HEALTH_STATE_HEALTHY || g.GetClearTime() == nil {
		t.Fatalf("after the clear: %v", g)
	}
	one := d.lease(t, 1)
	if !holds(one, gpu3) {
		t.Fatalf("the one-GPU lease after the clear: %v", one.GetAllocations())
	}
	res, err := d.gpus.Get(ctx, &gpusv1.GetRequest{Uuid: gpu3})
	if err != nil {
		t.Fatal(err)
	}
	if h := res.GetHistory(); len(h) != 2 || h[0].GetTo() != gpusv1.HealthState_HEALTH_STATE_HEALTHY || h[0].GetPrincipalId() == "" ||
		h[1].GetTo() != gpusv1.HealthState_HEALTH_STATE_UNHEALTHY || h[1].GetPrincipalId() != "" {
		t.Fatalf("history %v", h)
	}
}
