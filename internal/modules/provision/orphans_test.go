package provision

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/module"
	"github.com/better-compute/better-compute/server/servertest"
)

// orphanEnv is a sim class "racks" whose provider holds, for this deployment (test.local): a
// resource whose tag names no machine, one made by hand with a tag that is no machine id, one of
// a gone machine (the three orphans), one of a ready machine, and one of another deployment.
type orphanEnv struct {
	*env
	tenant uuid.UUID
	p      provision.Provider
	// orphans, live and foreign are the resources' provider ids.
	orphans       []string
	live, foreign string
	// clock is the sweep's time, which the test moves.
	mu    sync.Mutex
	clock time.Time
}

func newOrphanEnv(t *testing.T) *orphanEnv {
	t.Helper()
	ctx := t.Context()
	e := &orphanEnv{env: newEnv(t, nil), clock: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if _, err := pki.Init(ctx, e.Pool, servertest.Secret, "test.local"); err != nil {
		t.Fatal(err)
	}
	// The machines never boot during the test: nothing joins.
	params, err := structpb.NewStruct(map[string]any{"bootDelay": "9m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateClass(ctx, &provisionmodulev1.CreateClassRequest{Name: "racks", Provider: "sim", Params: params}); err != nil {
		t.Fatal(err)
	}
	if err := e.Pool.QueryRow(ctx, `SELECT tenant_id FROM provision_classes WHERE name = 'racks'`).Scan(&e.tenant); err != nil {
		t.Fatal(err)
	}
	if e.p, err = e.cloud.Factory([]byte(`{"bootDelay": "9m"}`), nil, provision.Egress{}); err != nil {
		t.Fatal(err)
	}
	machineRow := func(state string) string {
		id := uuid.Must(uuid.NewV7())
		if _, err := e.Pool.Exec(ctx, `INSERT INTO provision_machines (id, tenant_id, class, name, state) VALUES ($1, $2, 'racks', $3, $4)`,
			id, e.tenant, "m-"+id.String()[24:], state); err != nil {
			t.Fatal(err)
		}
		return id.String()
	}
	create := func(deployment, tag string) string {
		m, err := e.p.Create(ctx, provision.CreateRequest{
			ClientToken: uuid.NewString(), Name: "x",
			Tags: map[string]string{provision.TagDeployment: deployment, provision.TagMachine: tag},
			Join: provision.Join{Token: "bcj_unused", Gateway: "127.0.0.1:1"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return m.ProviderID
	}
	e.orphans = []string{
		create("test.local", uuid.Must(uuid.NewV7()).String()),
		create("test.local", "made-by-hand"),
		create("test.local", machineRow(StateGone)),
	}
	e.live = create("test.local", machineRow(StateReady))
	e.foreign = create("other.example", uuid.Must(uuid.NewV7()).String())
	return e
}

// sweeper is the orphan sweep with the section's settings and the env's clock.
func (e *orphanEnv) sweeper(t *testing.T, remove bool) *OrphanSweeper {
	t.Helper()
	cfg := e.mod.cfg
	cfg.Orphans.Remove = remove
	s, err := NewOrphanSweeper(OrphanSweeperOptions{
		Pool: e.Pool, Secret: servertest.Secret, Config: cfg, Providers: e.mod.enabled(),
		Now: func() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.clock },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (e *orphanEnv) advance(d time.Duration) { e.mu.Lock(); e.clock = e.clock.Add(d); e.mu.Unlock() }

func (e *orphanEnv) sweep(t *testing.T, s *OrphanSweeper) {
	t.Helper()
	if err := s.Reconcile(t.Context(), classKey(e.tenant, "racks")); err != nil {
		t.Fatal(err)
	}
}

// events counts the outbox's events of type typ by the provider id in their payload.
func (e *orphanEnv) events(t *testing.T, typ string) map[string]int {
	t.Helper()
	rows, err := e.Pool.Query(t.Context(), `SELECT payload->>'providerId', count(*) FROM outbox WHERE type = $1 AND tenant_id = $2 GROUP BY 1`, typ, e.tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// held are the provider ids the provider still lists.
func (e *orphanEnv) held(t *testing.T) map[string]bool {
	t.Helper()
	ms, err := e.p.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range ms {
		out[m.ProviderID] = true
	}
	return out
}

// wantOnce fails unless got has each of ids once, and nothing else.
func wantOnce(t *testing.T, what string, got map[string]int, ids ...string) {
	t.Helper()
	want := map[string]int{}
	for _, id := range ids {
		want[id] = 1
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: %v, want %v", what, got, want)
	}
}

func (e *orphanEnv) doctor(t *testing.T, remove bool) doctor.Finding {
	t.Helper()
	m := New(e.mod.providers)
	m.cfg = e.mod.cfg
	m.cfg.Orphans.Remove = remove
	for _, c := range m.Checks(module.CheckDeps{Pool: e.Pool, Secret: servertest.Secret}) {
		if c.Name == "orphans" {
			return c.Run(t.Context())
		}
	}
	t.Fatal("no orphans check")
	return doctor.Finding{}
}

// TestOrphanSweepReports: with removal off, the sweep announces each orphan once however often
// it runs and however old it gets, removes nothing, and leaves the live machine's and the other
// deployment's resources out; the doctor check lists the same orphans and says removal is off.
func TestOrphanSweepReports(t *testing.T) {
	t.Parallel()
	e := newOrphanEnv(t)
	s := e.sweeper(t, false)
	e.sweep(t, s)
	e.advance(24 * time.Hour)
	e.sweep(t, s)

	wantOnce(t, "found", e.events(t, "machine.orphan_found"), e.orphans...)
	wantOnce(t, "removed", e.events(t, "machine.orphan_removed"))
	held := e.held(t)
	for _, id := range append([]string{e.live, e.foreign}, e.orphans...) {
		if !held[id] {
			t.Errorf("%s was removed", id)
		}
	}
	f := e.doctor(t, false)
	if f.Severity != doctor.Warning || !strings.Contains(f.Cause, "3 provider resources") || !strings.Contains(f.Cause, "removal is off") ||
		strings.Contains(f.Cause, e.live) || strings.Contains(f.Cause, e.foreign) {
		t.Errorf("doctor = %+v", f)
	}
	for _, id := range e.orphans {
		if !strings.Contains(f.Cause, id) {
			t.Errorf("doctor does not name %s: %s", id, f.Cause)
		}
	}
}

// TestOrphanSweepRemoves: with removal on, an orphan younger than minAge is announced and kept;
// past minAge it is deleted at the provider and announced removed, once; the live machine's and
// the other deployment's resources are never touched, and the sweep forgets what is gone.
func TestOrphanSweepRemoves(t *testing.T) {
	t.Parallel()
	e := newOrphanEnv(t)
	s := e.sweeper(t, true)
	e.sweep(t, s)
	wantOnce(t, "found", e.events(t, "machine.orphan_found"), e.orphans...)
	if held := e.held(t); len(held) != 5 {
		t.Fatalf("removed before minAge: holds %v", held)
	}
	if f := e.doctor(t, true); f.Severity != doctor.Warning || !strings.Contains(f.Cause, "removes orphans seen for 15m0s") {
		t.Errorf("doctor = %+v", f)
	}

	e.advance(defaultOrphans.MinAge + time.Second)
	e.sweep(t, s)
	e.sweep(t, s)
	wantOnce(t, "found", e.events(t, "machine.orphan_found"), e.orphans...)
	wantOnce(t, "removed", e.events(t, "machine.orphan_removed"), e.orphans...)
	if held := e.held(t); len(held) != 2 || !held[e.live] || !held[e.foreign] {
		t.Errorf("holds %v, want %s and %s", held, e.live, e.foreign)
	}
	var rows int
	if err := e.Pool.QueryRow(t.Context(), `SELECT count(*) FROM provision_orphans`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d orphans remembered (%v)", rows, err)
	}
	if f := e.doctor(t, true); f.Severity != doctor.OK {
		t.Errorf("doctor after the sweep = %+v", f)
	}
}

// TestOrphanSweepCrash: a sweep that dies right after the provider deleted an orphan, before
// recording it, leaves the next sweep to record the removal, once; a sweep that dies listing
// changes nothing.
func TestOrphanSweepCrash(t *testing.T) {
	t.Parallel()
	e := newOrphanEnv(t)
	s := e.sweeper(t, true)
	c, err := provisiondb.New(e.Pool).GetClass(t.Context(), provisiondb.GetClassParams{TenantID: e.tenant, Name: "racks"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.sweep(t.Context(), c, crashing{Provider: e.p, at: "list", once: &sync.Once{}}, "test.local"); err == nil {
		t.Fatal("a sweep that crashed listing succeeded")
	}
	wantOnce(t, "found", e.events(t, "machine.orphan_found"))
	e.sweep(t, s)
	e.advance(defaultOrphans.MinAge)

	err = s.sweep(t.Context(), c, crashing{Provider: e.p, at: "delete", after: true, once: &sync.Once{}}, "test.local")
	if err == nil || !strings.Contains(err.Error(), errCrash.Error()) {
		t.Fatalf("sweep = %v, want the crash", err)
	}
	wantOnce(t, "removed before the next sweep", e.events(t, "machine.orphan_removed"), e.orphans[1:]...)
	e.sweep(t, s)
	e.sweep(t, s)
	wantOnce(t, "removed", e.events(t, "machine.orphan_removed"), e.orphans...)
	wantOnce(t, "found", e.events(t, "machine.orphan_found"), e.orphans...)
	if held := e.held(t); len(held) != 2 || !held[e.live] || !held[e.foreign] {
		t.Errorf("holds %v, want %s and %s", held, e.live, e.foreign)
	}
}

// TestOrphanSweepWorker: registered in the controllers role, the sweep's resync finds the class
// and its reconcile removes the orphans, as in a deployment.
func TestOrphanSweepWorker(t *testing.T) {
	t.Parallel()
	e := newOrphanEnv(t)
	s := e.sweeper(t, true)
	e.sweep(t, s)
	e.advance(time.Hour)
	e.runWorkers(t, s.Registration())
	poll.Until(t, 30*time.Second, "the orphans removed", func() bool { return len(e.events(t, "machine.orphan_removed")) == len(e.orphans) })
	if held := e.held(t); len(held) != 2 || !held[e.live] || !held[e.foreign] {
		t.Errorf("holds %v, want %s and %s", held, e.live, e.foreign)
	}
}

// TestOrphansConfig: the section's defaults pass; out-of-range values name their keys.
func TestOrphansConfig(t *testing.T) {
	t.Parallel()
	if errs := (OrphansConfig{}).validate(); len(errs) != 0 {
		t.Errorf("defaults: %v", errs)
	}
	if got := (OrphansConfig{}).withDefaults(); got.MinAge != 15*time.Minute || got.Interval != 10*time.Minute || got.Remove {
		t.Errorf("defaults %+v", got)
	}
	for _, c := range []struct {
		cfg OrphansConfig
		key string
	}{
		{OrphansConfig{MinAge: 59 * time.Second}, "orphans.minAge"},
		{OrphansConfig{MinAge: 7*24*time.Hour + time.Second}, "orphans.minAge"},
		{OrphansConfig{Interval: 29 * time.Second}, "orphans.interval"},
		{OrphansConfig{Interval: 25 * time.Hour}, "orphans.interval"},
	} {
		errs := c.cfg.validate()
		if len(errs) != 1 {
			t.Errorf("%+v: %v", c.cfg, errs)
			continue
		}
		if fe, ok := errors.AsType[*module.FieldError](errs[0]); !ok || fe.Key != c.key {
			t.Errorf("%+v: %v, want key %s", c.cfg, errs[0], c.key)
		}
	}
}
