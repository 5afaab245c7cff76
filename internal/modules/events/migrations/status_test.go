package migrations_test

import (
	"log/slog"
	"strings"
	"testing"

	eventsdb "github.com/better-compute/better-compute/gen/modules/events/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/internal/modules/events/migrations"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestStatusQueries: the module's migrations apply, and RecordNatsStatus adds up what was
// published, moves the ids only when something was, and keeps the error within the column.
func TestStatusQueries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	if err := migrate.ApplyAll(ctx, pool, slog.New(slog.DiscardHandler), []migrate.ModuleMigrations{{Name: "events", FS: migrations.FS}}); err != nil {
		t.Fatal(err)
	}
	q := eventsdb.New(pool)
	record := func(eventID, seq, n int64, lastErr string) {
		t.Helper()
		if err := q.RecordNatsStatus(ctx, eventsdb.RecordNatsStatusParams{
			Sink: "nats", Stream: "EVENTS", LastEventID: eventID, LastStreamSeq: seq, PublishedInBatch: n, LastError: lastErr,
		}); err != nil {
			t.Fatal(err)
		}
	}
	record(10, 3, 3, "")
	record(12, 5, 2, "")
	record(0, 0, 0, strings.Repeat("x", 2000))
	s, err := q.GetNatsStatus(ctx, "nats")
	if err != nil {
		t.Fatal(err)
	}
	if s.LastEventID != 12 || s.LastStreamSeq != 5 || s.Published != 5 || len(s.LastError) != 1024 || s.Stream != "EVENTS" {
		t.Fatalf("status = %+v (error of %d characters)", s, len(s.LastError))
	}
	if err := q.ClearNatsError(ctx, "nats"); err != nil {
		t.Fatal(err)
	}
	if s, err := q.GetNatsStatus(ctx, "nats"); err != nil || s.LastError != "" || s.Published != 5 {
		t.Fatalf("after ClearNatsError: %+v, %v", s, err)
	}
}
