package retention_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/workers/internal/retention"
)

// TestPruneEndedSignIns: sign-in flows spent or expired over an hour ago go, live ones stay;
// sessions that expired or were revoked more than retention.SessionsKeep ago go, live ones and
// recently ended ones stay, in batches.
func TestPruneEndedSignIns(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	tenant, principal, method := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	if err := db.New(pool).EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: tenant, Name: "root"}); err != nil {
		t.Fatal(err)
	}
	exec(t, pool, `INSERT INTO principals (id, tenant_id, kind, name) VALUES ($1, $2, 'user', 'corp:alice')`, principal, tenant)
	exec(t, pool, `INSERT INTO auth_methods (id, tenant_id, name, kind, issuer) VALUES ($1, $2, 'corp', 'oidc', 'https://idp.example/')`, method, tenant)

	flow := func(state string, expiresAgo time.Duration, used bool) {
		exec(t, pool, `INSERT INTO auth_flows (state_hash, auth_method_id, kind, secret_sealed, expires_at, used_at)
			VALUES ($1, $2, 'cli', '\x00', now() - $3::bigint * interval '1 millisecond', CASE WHEN $4::boolean THEN now() END)`,
			[]byte(state), method, expiresAgo.Milliseconds(), used)
	}
	flow("expired-long-ago", 2*time.Hour, false)
	flow("spent-long-ago", 2*time.Hour, true)
	flow("live", -10*time.Minute, false)
	flow("just-expired", time.Minute, false)

	session := func(id string, expiresAgo time.Duration, revokedAgo *time.Duration) {
		var revoked any
		if revokedAgo != nil {
			revoked = time.Now().Add(-*revokedAgo)
		}
		exec(t, pool, `INSERT INTO sessions (id, tenant_id, principal_id, auth_method_id, kind, secret_hash, expires_at, revoked_at)
			VALUES ($1, $2, $3, $4, 'cli', '\x00', now() - $5::bigint * interval '1 millisecond', $6)`,
			id, tenant, principal, method, expiresAgo.Milliseconds(), revoked)
	}
	week, day := retention.SessionsKeep, 24*time.Hour
	long, recent := week+day, week-day
	for _, id := range []string{"expired-1", "expired-2", "expired-3"} {
		session(id, long, nil)
	}
	session("revoked-long-ago", -day, &long)
	session("live", -day, nil)
	session("expired-recently", recent, nil)
	session("revoked-recently", -day, &recent)

	n, err := retention.Prune(ctx, pool, acquire(t, pool), retention.Options{Retention: keep, Batch: 2})
	if err != nil {
		t.Fatal(err)
	}
	if n.AuthFlows != 2 || n.Sessions != 4 {
		t.Errorf("pruned %+v, want 2 auth flows and 4 sessions", n)
	}
	left := func(sql string) []string {
		rows, err := pool.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	if got := left(`SELECT convert_from(state_hash, 'UTF8') FROM auth_flows ORDER BY 1`); len(got) != 2 || got[0] != "just-expired" || got[1] != "live" {
		t.Errorf("auth flows left: %v, want just-expired and live", got)
	}
	if got := left(`SELECT id FROM sessions ORDER BY 1`); len(got) != 3 || got[0] != "expired-recently" || got[1] != "live" || got[2] != "revoked-recently" {
		t.Errorf("sessions left: %v, want expired-recently, live and revoked-recently", got)
	}
}
