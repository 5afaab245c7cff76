package database_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestPipeTxDeferred: deferred statements run, in order, with the next statement and COMMIT;
// one that fails aborts the transaction, COMMIT included, and End rolls it back.
func TestPipeTxDeferred(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE t (v integer PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		t.Helper()
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	tx, err := database.BeginPipe(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	d := tx.Deferred()
	for _, v := range []int{1, 2} {
		if _, err := d.Exec(ctx, "INSERT INTO t VALUES ($1)", v); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.QueryRow(ctx, "SELECT 1").Scan(new(int)); err == nil {
		t.Error("a deferred query returned a row")
	}
	tx.CommitNext()
	if _, err := tx.Exec(ctx, "INSERT INTO t SELECT max(v) + 1 FROM t"); err != nil {
		t.Fatal(err)
	}
	tx.End(ctx)
	if n := count(); n != 3 {
		t.Fatalf("%d rows after the commit, want 3", n)
	}

	tx, err = database.BeginPipe(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Deferred().Exec(ctx, "INSERT INTO t VALUES (1)"); err != nil { // a duplicate
		t.Fatal(err)
	}
	tx.CommitNext()
	_, err = tx.Exec(ctx, "INSERT INTO t VALUES (10)")
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "23505" {
		t.Fatalf("a failing deferred statement: %v, want its unique violation", err)
	}
	tx.End(ctx)
	if n := count(); n != 3 {
		t.Fatalf("%d rows after the refusal, want 3", n)
	}
}

// TestPipeTxFollowing: a query queued on Following goes with the next statement, after it (it
// sees that statement's write), and its row is returned when it is run again; when the
// statement fails, it returns the error instead.
func TestPipeTxFollowing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE f (v integer PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx, err := database.BeginPipe(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.End(ctx)
	f := tx.Following()
	const sum = "SELECT sum(v)::integer, NULL::text FROM f WHERE v < $1"
	if err := f.QueryRow(ctx, sum, 100).Scan(new(int), new(*string)); !errors.Is(err, database.ErrFollowing) {
		t.Fatalf("queueing: %v, want ErrFollowing", err)
	}
	var v int
	if err := tx.QueryRow(ctx, "INSERT INTO f SELECT g FROM generate_series(1, 2) g RETURNING v").Scan(&v); err != nil {
		t.Fatal(err)
	}
	var got int
	var null *string
	if err := f.QueryRow(ctx, sum, 100).Scan(&got, &null); err != nil || got != 3 || null != nil {
		t.Fatalf("following row %d, %v, %v; want 3, nil, nil", got, null, err)
	}
	// A second one, after a failing statement: the error that aborted the transaction.
	if err := f.QueryRow(ctx, sum, 100).Scan(new(int), new(*string)); !errors.Is(err, database.ErrFollowing) {
		t.Fatalf("queueing again: %v", err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO f VALUES (1)"); err == nil {
		t.Fatal("a duplicate inserted")
	}
	if err := f.QueryRow(ctx, sum, 100).Scan(new(int), new(*string)); err == nil {
		t.Fatal("the following query of a failed statement returned a row")
	}
}
