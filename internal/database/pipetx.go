package database

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PipeTx is a transaction on one pooled connection that saves round trips: BEGIN goes to the
// server together with the transaction's first statement, COMMIT together with its last (see
// CommitNext), and statements whose results the caller does not need (see Deferred) together
// with the statement after them, each group as one pgx.Batch. Its other statements run one at
// a time, as on a pgx.Tx, since a caller usually reads what one returned before it sends the
// next. It serves generated queries (db.New) as a pgx.Tx does; End it in every case.
//
// A statement that fails aborts the transaction: the statements after it in its group do not
// run, a COMMIT among them included, and End rolls back.
type PipeTx struct {
	conn  *pgxpool.Conn
	begun bool
	// commitNext makes the next statement sent carry COMMIT after it.
	commitNext bool
	done       bool
	deferred   []deferredStmt
	// follow is the query to go after the next statement (Following); followed is its result.
	follow   *deferredStmt
	followed *followedRow
}

type deferredStmt struct {
	sql  string
	args []any
}

// BeginPipe acquires a connection for a PipeTx; BEGIN goes with the first statement.
func BeginPipe(ctx context.Context, pool *pgxpool.Pool) (*PipeTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a connection: %w", err)
	}
	return &PipeTx{conn: conn}, nil
}

// CommitNext makes the next statement of Exec or of a generated :exec query send COMMIT after
// it: the transaction then commits in that statement's round trip, or returns the error that
// aborted it (pgx.ErrTxCommitRollback when an earlier statement had failed).
func (t *PipeTx) CommitNext() { t.commitNext = true }

// Deferred returns the transaction's queue of statements that do not return rows (generated
// :exec queries): each one is sent, in order, just before the transaction's next statement,
// in its round trip, and its error is that statement's.
func (t *PipeTx) Deferred() Deferred { return Deferred{t: t} }

// Deferred queues statements on a PipeTx; see PipeTx.Deferred. It serves generated :exec
// queries (db.New); queries that return rows fail.
type Deferred struct{ t *PipeTx }

// Exec queues the statement, to be sent with the transaction's next one.
func (d Deferred) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	d.t.deferred = append(d.t.deferred, deferredStmt{sql: sql, args: args})
	return pgconn.CommandTag{}, nil
}

var errDeferredRows = errors.New("database: a deferred statement returns no rows")

// Query fails: a deferred statement returns nothing.
func (d Deferred) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errDeferredRows
}

// QueryRow fails: a deferred statement returns nothing.
func (d Deferred) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{errDeferredRows} }

// Following returns the transaction's slot for a query of one row to be sent right after its
// next statement, in that statement's round trip: a generated :one query run on it the first
// time is queued and returns ErrFollowing; run again with the same arguments once the next
// statement has run, it returns its row (or the error that aborted it). It saves a round trip
// where a read must follow a write but needs nothing the write returns.
func (t *PipeTx) Following() Following { return Following{t: t} }

// ErrFollowing is what a query queued on Following returns: it was queued, not run.
var ErrFollowing = errors.New("database: queued to follow the next statement")

// Following queues a query after a PipeTx's next statement and then returns its row; see
// PipeTx.Following. It serves generated :one queries (db.New).
type Following struct{ t *PipeTx }

// QueryRow queues the query the first time, and returns its row once it has run.
func (f Following) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	t := f.t
	switch {
	case t.followed != nil && t.followed.sql == sql:
		r := t.followed
		t.followed = nil
		return r
	case t.follow == nil && t.followed == nil:
		t.follow = &deferredStmt{sql: sql, args: args}
		return errRow{ErrFollowing}
	case t.follow != nil:
		return errRow{errors.New("database: the following query has not been sent: no statement ran after it was queued")}
	}
	return errRow{errors.New("database: a different query than the one that followed")}
}

var errFollowingRows = errors.New("database: a following query returns one row")

// Exec fails: a following query returns one row.
func (f Following) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errFollowingRows
}

// Query fails: a following query returns one row.
func (f Following) Query(context.Context, string, ...any) (pgx.Rows, error) {
	return nil, errFollowingRows
}

// followedRow is a following query's row, read off the batch and kept until the query is run
// again for it.
type followedRow struct {
	sql     string
	err     error
	found   bool
	fields  []pgconn.FieldDescription
	values  [][]byte
	typeMap *pgtype.Map
}

func (r *followedRow) Scan(dest ...any) error {
	switch {
	case r.err != nil:
		return r.err
	case !r.found:
		return pgx.ErrNoRows
	}
	return pgx.ScanRow(r.typeMap, r.fields, r.values, dest...)
}

// readFollow reads the result of the following query s, which the batch sent after the
// caller's statement, and keeps it for Following.
func (t *PipeTx) readFollow(br pgx.BatchResults, s *deferredStmt) {
	r := &followedRow{sql: s.sql, typeMap: t.conn.Conn().TypeMap()}
	rows, err := br.Query()
	if err == nil {
		if rows.Next() {
			r.found = true
			r.fields = slices.Clone(rows.FieldDescriptions())
			for _, v := range rows.RawValues() {
				r.values = append(r.values, bytes.Clone(v)) // nil stays nil: NULL
			}
		}
		rows.Close()
		err = rows.Err()
	}
	r.err = err
	t.followed = r
}

// batch queues BEGIN when the transaction has not begun and the deferred statements, then the
// statement, then the following query if one is queued; pre says what came before it and what
// follows.
func (t *PipeTx) batch(sql string, args []any) (*pgx.Batch, prefix) {
	b := &pgx.Batch{}
	pre := prefix{begin: !t.begun, deferred: len(t.deferred), follow: t.follow}
	if pre.begin {
		b.Queue("begin")
		t.begun = true
	}
	for _, s := range t.deferred {
		b.Queue(s.sql, s.args...)
	}
	t.deferred = nil
	b.Queue(sql, args...)
	if t.follow != nil {
		b.Queue(t.follow.sql, t.follow.args...)
		t.follow = nil
	}
	return b, pre
}

// prefix is what a batch sends before the caller's statement.
type prefix struct {
	begin    bool
	deferred int
	follow   *deferredStmt // sent after the statement
}

// direct says whether a statement goes alone, with nothing before or after it.
func (t *PipeTx) direct(commit bool) bool {
	return t.begun && len(t.deferred) == 0 && t.follow == nil && !commit
}

// read reads the results of the statements queued before the caller's.
func (p prefix) read(br pgx.BatchResults) error {
	if p.begin {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
	}
	for i := range p.deferred {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("deferred statement %d: %w", i+1, err)
		}
	}
	return nil
}

// Exec runs a statement, with BEGIN and the deferred statements before it and COMMIT after it
// when there are.
func (t *PipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	commit := t.commitNext
	if t.direct(commit) {
		return t.conn.Exec(ctx, sql, args...)
	}
	b, pre := t.batch(sql, args)
	if commit {
		t.commitNext = false
		b.Queue("commit")
	}
	br := t.conn.SendBatch(ctx, b)
	tag, err := t.results(br, pre, commit)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return tag, err
}

func (t *PipeTx) results(br pgx.BatchResults, pre prefix, commit bool) (pgconn.CommandTag, error) {
	if err := pre.read(br); err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if pre.follow != nil {
		t.readFollow(br, pre.follow)
	}
	if err != nil || !commit {
		return tag, err
	}
	ctag, err := br.Exec()
	if err != nil {
		return tag, fmt.Errorf("commit: %w", err)
	}
	t.done = true
	if ctag.String() == "ROLLBACK" { // an earlier statement failed and aborted the transaction
		return tag, pgx.ErrTxCommitRollback
	}
	return tag, nil
}

// Query runs a query, with BEGIN and the deferred statements before it when there are.
func (t *PipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.direct(false) {
		return t.conn.Query(ctx, sql, args...)
	}
	b, pre := t.batch(sql, args)
	br := t.conn.SendBatch(ctx, b)
	if err := pre.read(br); err != nil {
		return nil, errors.Join(err, br.Close())
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br, t: t, follow: pre.follow}, nil
}

// QueryRow runs a query of one row, with BEGIN and the deferred statements before it when
// there are.
func (t *PipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.direct(false) {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	b, pre := t.batch(sql, args)
	br := t.conn.SendBatch(ctx, b)
	if err := pre.read(br); err != nil {
		return errRow{errors.Join(err, br.Close())}
	}
	return &batchRow{row: br.QueryRow(), br: br, t: t, follow: pre.follow}
}

// End rolls back a transaction that did not commit, and gives the connection back to the pool
// (which closes it if it is still in a transaction, or busy).
func (t *PipeTx) End(ctx context.Context) {
	if t.begun && !t.done {
		_, _ = t.conn.Exec(context.WithoutCancel(ctx), "rollback") // the pool drops a connection left in a transaction
	}
	t.conn.Release()
}

// batchRows are the rows of a batch's last statement: closing them finishes the batch, which
// frees the connection.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	t      *PipeTx
	follow *deferredStmt
	closed bool
	err    error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
		if r.follow != nil {
			r.t.readFollow(r.br, r.follow)
		}
		r.err = r.br.Close()
	}
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

// batchRow is the row of a batch's last statement: scanning it finishes the batch.
type batchRow struct {
	row    pgx.Row
	br     pgx.BatchResults
	t      *PipeTx
	follow *deferredStmt
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if r.follow != nil {
		r.t.readFollow(r.br, r.follow)
	}
	if cerr := r.br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
