package doctor_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/oidctest"
)

// TestChecksAuthMethods: a method whose provider (a real one, internal/oidctest) answers makes
// the "auth methods" finding OK with the count; a method whose issuer is dead is a Warning
// naming its tenant, its name and why.
func TestChecksAuthMethods(t *testing.T) {
	t.Parallel()
	op := oidctest.Start(t, oidctest.Options{})
	pool := dbtest.Pool(t)
	tenant := uuid.Must(uuid.NewV7())
	if err := db.New(pool).EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: tenant, Name: "root"}); err != nil {
		t.Fatal(err)
	}
	method := func(name, kind, issuer string) {
		if _, err := pool.Exec(ctx, `INSERT INTO auth_methods (id, tenant_id, name, kind, issuer, client_id, audiences)
			VALUES ($1, $2, $3, $4, $5, 'web', '{web}')`, uuid.Must(uuid.NewV7()), tenant, name, kind, issuer); err != nil {
			t.Fatal(err)
		}
	}
	run := func(pool *pgxpool.Pool) []doctor.Finding {
		t.Helper()
		fs, err := doctor.Run(ctx, doctor.Options{Pool: pool, AllowPrivateIssuers: true, AuthTimeout: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}

	method("corp", "oidc", op.Issuer())
	method("ci", "jwt", op.Issuer())
	if f := find(t, run(pool), "auth methods"); f.Severity != doctor.OK || !strings.Contains(f.Cause, "2 auth methods") {
		t.Errorf("two answering providers: %+v", f)
	}

	method("dead", "oidc", "http://127.0.0.1:"+strconv.Itoa(closedPort(t))+"/")
	fs := run(pool)
	f := find(t, fs, "auth method root/dead")
	if f.Severity != doctor.Warning || !strings.Contains(f.Cause, `"dead" of tenant root`) || !strings.Contains(f.Cause, "unavailable") || f.Fix == "" {
		t.Errorf("a dead issuer: %+v", f)
	}
	for _, f := range fs {
		if f.Check == "auth methods" || f.Check == "auth method root/corp" || f.Check == "auth method root/ci" {
			t.Errorf("with a failing method, a finding for the others: %+v", f)
		}
	}

	// Without allowPrivateIssuers a provider on loopback is itself the reason.
	fs, err := doctor.Run(ctx, doctor.Options{Pool: pool, AuthTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if f := find(t, fs, "auth method root/corp"); f.Severity != doctor.Warning || !strings.Contains(f.Cause, "private") {
		t.Errorf("a loopback provider without allowPrivateIssuers: %+v", f)
	}
}

// closedPort is a port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}
