package doctor_test

import (
	"context"
	"testing"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/reconcile"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const secret = "doctor-test-secret-0123456789abcdef-xyz"

var ctx = context.Background()

func find(t *testing.T, fs []doctor.Finding, check string) doctor.Finding {
	t.Helper()
	for _, f := range fs {
		if f.Check == check {
			return f
		}
	}
	t.Fatalf("no %q finding in %+v", check, fs)
	return doctor.Finding{}
}

func TestUnmigratedDatabase(t *testing.T) {
	t.Parallel()
	pool, err := database.Open(ctx, dbtest.EmptyURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	fs, err := doctor.Run(ctx, doctor.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if f := find(t, fs, "schema"); f.Severity != doctor.Error || f.Fix == "" {
		t.Errorf("schema finding %+v", f)
	}
	if doctor.Worst(fs) != doctor.Error {
		t.Errorf("worst %s", doctor.Worst(fs))
	}
}

func TestRunningChecks(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	fs, err := doctor.Run(ctx, doctor.Options{Pool: pool, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if f := find(t, fs, "pki"); f.Severity != doctor.Error {
		t.Errorf("pki before init: %+v", f)
	}
	if _, err := pki.Init(ctx, pool, secret, "doctor.test"); err != nil {
		t.Fatal(err)
	}
	// Work overdue for a while, and a sweeper that never ran.
	if err := reconcile.Enqueue(ctx, db.New(pool), "test.kind", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "UPDATE reconcile_queue SET due_at = now() - interval '5 minutes'"); err != nil {
		t.Fatal(err)
	}
	fs, err = doctor.Run(ctx, doctor.Options{Pool: pool, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	for check, want := range map[string]doctor.Severity{
		"schema": doctor.OK, "pki": doctor.OK, "gateway authenticates daemons": doctor.OK,
		"api reaches gateways": doctor.Warning, "reconcile backlog": doctor.Warning,
		"command sweeper": doctor.Warning, "clock": doctor.OK, "method registry": doctor.OK,
		"session transports": doctor.OK,
	} {
		if f := find(t, fs, check); f.Severity != want {
			t.Errorf("%s: %+v, want %s", check, f, want)
		}
	}
	if err := jobrun.Record(ctx, pool, "command-sweeper", nil); err != nil {
		t.Fatal(err)
	}
	fs, err = doctor.Run(ctx, doctor.Options{Pool: pool, Secret: "a-wrong-secret-0123456789abcdef-000"})
	if err != nil {
		t.Fatal(err)
	}
	if f := find(t, fs, "command sweeper"); f.Severity != doctor.OK {
		t.Errorf("sweeper after a run: %+v", f)
	}
	if f := find(t, fs, "gateway authenticates daemons"); f.Severity != doctor.Error {
		t.Errorf("wrong secret: %+v", f)
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
