package admission_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1/provisionmodulev1connect"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/module"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// hooked stands in for a module's service: its CreateClass admits change through module.Admit
// under the target "hook/<name>". As the API's waker it notes each wake, as it notes each
// AfterCommit function its changes add, with how many of its calls had committed by then.
type hooked struct {
	provisionmodulev1connect.UnimplementedProvisionModuleServiceHandler
	pool   *pgxpool.Pool
	admit  *module.Admitter
	change func(*module.Tx) error

	mu     sync.Mutex
	tenant uuid.UUID
	runs   int
	log    []string
}

func (h *hooked) CreateClass(ctx context.Context, req *provisionmodulev1.CreateClassRequest) (*provisionmodulev1.CreateClassResponse, error) {
	caller, _ := module.CallerOf(ctx)
	h.mu.Lock()
	h.tenant = caller.TenantID
	h.mu.Unlock()
	return module.Admit(ctx, h.admit, req, func(_ context.Context, tx *module.Tx) (*provisionmodulev1.CreateClassResponse, error) {
		h.mu.Lock()
		h.runs++
		h.mu.Unlock()
		tx.Target("hook", req.GetName())
		if err := h.change(tx); err != nil {
			return nil, err
		}
		return &provisionmodulev1.CreateClassResponse{Class: &provisionmodulev1.MachineClass{Name: req.GetName()}}, nil
	})
}

// Wake is the API's waker.
func (h *hooked) Wake(kind string) { h.note(context.Background(), "wake "+kind) }

// afterCommit is an AfterCommit function that notes itself as what.
func (h *hooked) afterCommit(what string) func(context.Context) {
	return func(ctx context.Context) { h.note(ctx, what) }
}

// note logs what, with the number of calls whose audit rows a connection outside their
// transactions sees: those that committed.
func (h *hooked) note(ctx context.Context, what string) {
	h.mu.Lock()
	tenant := h.tenant
	h.mu.Unlock()
	rows, err := db.New(h.pool).ListAuditEvents(ctx, db.ListAuditEventsParams{TenantID: &tenant, Before: math.MaxInt64, Lim: 1000})
	committed := 0
	for _, r := range rows {
		if strings.HasPrefix(r.Target, "hook/") {
			committed++
		}
	}
	if err != nil {
		what += fmt.Sprintf(" (audit: %v)", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.log = append(h.log, fmt.Sprintf("%s: %d committed", what, committed))
}

// taken returns what was noted since the last call, and the number of changes run.
func (h *hooked) taken() ([]string, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	log := h.log
	h.log = nil
	return log, h.runs
}

// startHooked runs the API with h as its waker and h's CreateClass mounted as a module's.
func startHooked(t *testing.T, change func(h *hooked, tx *module.Tx) error) (*hooked, provisionmodulev1connect.ProvisionModuleServiceClient) {
	t.Helper()
	h := &hooked{pool: dbtest.Pool(t)}
	h.change = func(tx *module.Tx) error { return change(h, tx) }
	api := servertest.Start(t, h.pool, func(o *server.Options) {
		o.Waker = h
		o.Services = []module.Service{{
			File: provisionmodulev1.File_bettercompute_modules_provision_v1_provision_proto,
			Mount: func(deps module.ServiceDeps, opts ...connect.HandlerOption) (string, http.Handler, error) {
				h.admit = deps.Admitter
				path, handler := provisionmodulev1connect.NewProvisionModuleServiceHandler(h, opts...)
				return path, handler, nil
			},
		}}
	})
	return h, provisionmodulev1connect.NewProvisionModuleServiceClient(api.HTTPClient(api.AdminKey), api.URL)
}

// TestWakeAfterCommit checks that a committed call's AfterCommit functions run and its kinds
// are woken once each, in that order, after the commit.
func TestWakeAfterCommit(t *testing.T) {
	t.Parallel()
	h, c := startHooked(t, func(h *hooked, tx *module.Tx) error {
		tx.Wake("a")
		tx.AfterCommit(h.afterCommit("after 1"))
		tx.Wake("b")
		tx.Wake("a")
		tx.AfterCommit(h.afterCommit("after 2"))
		tx.Wake("b")
		return nil
	})
	for i, name := range []string{"first", "second"} {
		if _, err := c.CreateClass(t.Context(), &provisionmodulev1.CreateClassRequest{Name: name}); err != nil {
			t.Fatal(err)
		}
		// The post-commit work is done before the call answers.
		got, _ := h.taken()
		n := i + 1
		want := []string{
			fmt.Sprintf("after 1: %d committed", n), fmt.Sprintf("after 2: %d committed", n),
			fmt.Sprintf("wake a: %d committed", n), fmt.Sprintf("wake b: %d committed", n),
		}
		if !slices.Equal(got, want) {
			t.Errorf("call %d: after its commit\n%q\nwant\n%q", n, got, want)
		}
	}
}

// TestNoWakeOnRollback checks that a call whose change fails wakes nothing and runs no
// AfterCommit function, though it asked for both before failing.
func TestNoWakeOnRollback(t *testing.T) {
	t.Parallel()
	h, c := startHooked(t, func(h *hooked, tx *module.Tx) error {
		tx.Wake("a")
		tx.AfterCommit(h.afterCommit("after"))
		return errors.New("the change failed")
	})
	_, err := c.CreateClass(t.Context(), &provisionmodulev1.CreateClassRequest{Name: "failing"})
	if err == nil {
		t.Fatal("CreateClass succeeded; its change failed")
	}
	if got, runs := h.taken(); len(got) > 0 || runs != 1 {
		t.Errorf("after the change failed (run %d times, want 1): %q, want nothing", runs, got)
	}
}

// TestNoWakeOnReplay checks that a retry with the same Idempotency-Key, answered from the stored
// response without running the change again, wakes nothing and runs no AfterCommit function.
func TestNoWakeOnReplay(t *testing.T) {
	t.Parallel()
	h, c := startHooked(t, func(h *hooked, tx *module.Tx) error {
		tx.Wake("a")
		tx.AfterCommit(h.afterCommit("after"))
		return nil
	})
	withKey := func() context.Context {
		cctx, ci := connect.NewClientContext(t.Context())
		ci.RequestHeader().Set(guard.IdempotencyKeyHeader, "once")
		return cctx
	}
	req := &provisionmodulev1.CreateClassRequest{Name: "once"}
	first, err := c.CreateClass(withKey(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"after: 1 committed", "wake a: 1 committed"}
	if got, _ := h.taken(); !slices.Equal(got, want) {
		t.Fatalf("after the first call %q, want %q", got, want)
	}
	again, err := c.CreateClass(withKey(), req)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetClass().GetName() != first.GetClass().GetName() {
		t.Errorf("the retry answered %v, want the stored %v", again, first)
	}
	if got, runs := h.taken(); len(got) > 0 || runs != 1 {
		t.Errorf("after the retry (the change ran %d times, want 1): %q, want nothing", runs, got)
	}
}
