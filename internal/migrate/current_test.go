package migrate_test

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/queries"
)

// TestCurrentToleratesNewerMigrations: a binary is current when the database has all of its
// migrations, even with newer ones from a later release (a rolling deploy); not while one of its
// own is pending; and an unknown migration older than its newest is an error.
func TestCurrentToleratesNewerMigrations(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	real, err := migrate.Load(queries.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	last := real[len(real)-1].Version
	extra := func(v int64) migrate.Migration {
		return migrate.Migration{Version: last + v, Name: "extra", SQL: "SELECT 1", Checksum: "c"}
	}
	with := func(ms ...migrate.Migration) []migrate.Migration { return append(real[:len(real):len(real)], ms...) }
	for _, tc := range []struct {
		name      string
		applied   []migrate.Migration // beyond the real ones
		binary    []migrate.Migration // what the binary knows
		current   bool
		errSubstr string
	}{
		{"exactly its own", nil, real, true, ""},
		{"newer ones too", with(extra(1), extra(2)), real, true, ""},
		{"one of its own pending", nil, with(extra(1)), false, ""},
		{"an unknown older one", with(extra(1)), with(extra(2)), false, "does not know"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.Pool(t)
			if tc.applied != nil {
				if _, err := migrate.NewWith(pool, tc.applied).Up(ctx); err != nil {
					t.Fatal(err)
				}
			}
			current, err := migrate.NewWith(pool, tc.binary).Current(ctx)
			switch {
			case tc.errSubstr != "" && (err == nil || !strings.Contains(err.Error(), tc.errSubstr)):
				t.Fatalf("Current = %v, %v; want an error containing %q", current, err, tc.errSubstr)
			case tc.errSubstr == "" && (err != nil || current != tc.current):
				t.Fatalf("Current = %v, %v; want %v", current, err, tc.current)
			}
			if tc.name == "newer ones too" {
				// Status, for doctor and the migrate command, still reports the newer schema.
				if _, err := migrate.NewWith(pool, tc.binary).Status(ctx); err == nil || !strings.Contains(err.Error(), "does not know") {
					t.Errorf("Status = %v, want an error naming the unknown migration", err)
				}
			}
		})
	}
}
