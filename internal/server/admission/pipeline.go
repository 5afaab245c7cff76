package admission

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pipeTx is a call's transaction on one pooled connection that sends BEGIN together with the
// transaction's first statement, and COMMIT together with its last (the admission record), each
// pair as one pgx.Batch: one round trip each instead of two. A call's statements otherwise run
// one at a time, as on a pgx.Tx, since each handler reads what the one before returned.
type pipeTx struct {
	conn  *pgxpool.Conn
	begun bool
	// commitNext makes the next Exec send COMMIT after its statement.
	commitNext bool
	done       bool
}

func beginPipe(ctx context.Context, pool *pgxpool.Pool) (*pipeTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a connection: %w", err)
	}
	return &pipeTx{conn: conn}, nil
}

// batch queues BEGIN when the transaction has not begun, the statement, and COMMIT when asked.
func (t *pipeTx) batch(sql string, args []any) (*pgx.Batch, bool) {
	b := &pgx.Batch{}
	begin := !t.begun
	if begin {
		b.Queue("begin")
		t.begun = true
	}
	b.Queue(sql, args...)
	return b, begin
}

// Exec runs a statement, with BEGIN before it if it is the first and COMMIT after it if asked.
func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.begun && !t.commitNext {
		return t.conn.Exec(ctx, sql, args...)
	}
	b, begin := t.batch(sql, args)
	commit := t.commitNext
	if commit {
		t.commitNext = false
		b.Queue("commit")
	}
	br := t.conn.SendBatch(ctx, b)
	tag, err := t.results(br, begin, commit)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return tag, err
}

func (t *pipeTx) results(br pgx.BatchResults, begin, commit bool) (pgconn.CommandTag, error) {
	if begin {
		if _, err := br.Exec(); err != nil {
			return pgconn.CommandTag{}, fmt.Errorf("begin: %w", err)
		}
	}
	tag, err := br.Exec()
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

// Query runs a query, with BEGIN before it if it is the first.
func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.begun {
		return t.conn.Query(ctx, sql, args...)
	}
	b, _ := t.batch(sql, args)
	br := t.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		return nil, errors.Join(fmt.Errorf("begin: %w", err), br.Close())
	}
	rows, err := br.Query()
	if err != nil {
		return nil, errors.Join(err, br.Close())
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs a query of one row, with BEGIN before it if it is the first.
func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if t.begun {
		return t.conn.QueryRow(ctx, sql, args...)
	}
	b, _ := t.batch(sql, args)
	br := t.conn.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		return errRow{errors.Join(fmt.Errorf("begin: %w", err), br.Close())}
	}
	return &batchRow{row: br.QueryRow(), br: br}
}

// end rolls back a transaction that did not commit, and gives the connection back to the pool
// (which closes it if it is still in a transaction, or busy).
func (t *pipeTx) end(ctx context.Context) {
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
	closed bool
	err    error
}

func (r *batchRows) Close() {
	r.Rows.Close()
	if !r.closed {
		r.closed = true
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
	row pgx.Row
	br  pgx.BatchResults
}

func (r *batchRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	if cerr := r.br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
