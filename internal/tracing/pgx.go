package tracing

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// QueryTracer makes a span of every statement run inside a span: named after its sqlc query
// ("GetNode", from the "-- name:" comment sqlc puts first) or, for other statements, after their
// first keyword ("BEGIN", "COMMIT"). The SQL text and its arguments are never recorded.
// Statements outside any span (the background loops' polling) make no span of their own, so
// they do not flood the collector with one-span traces. Install it as pgx.ConnConfig.Tracer.
type QueryTracer struct{}

var _ pgx.QueryTracer = QueryTracer{}

type querySpanKey struct{}

// TraceQueryStart starts the statement's span.
func (QueryTracer) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s := current.Load()
	if s == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	name := StatementName(data.SQL)
	attrs := []attribute.KeyValue{semconv.DBSystemNamePostgreSQL, semconv.DBQuerySummary(name)}
	if op := firstKeyword(data.SQL); op != "" {
		attrs = append(attrs, semconv.DBOperationName(op))
	}
	if conn != nil {
		if cfg := conn.Config(); cfg != nil {
			attrs = append(attrs, semconv.DBNamespace(cfg.Database), semconv.ServerAddress(cfg.Host), semconv.ServerPort(int(cfg.Port)))
		}
	}
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, querySpanKey{}, span)
}

// TraceQueryEnd ends the span TraceQueryStart started, if it started one.
func (QueryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	span, ok := ctx.Value(querySpanKey{}).(trace.Span)
	if !ok {
		return
	}
	if data.Err != nil {
		span.RecordError(data.Err)
		span.SetStatus(codes.Error, data.Err.Error())
		if pgErr, ok := errors.AsType[*pgconn.PgError](data.Err); ok {
			span.SetAttributes(semconv.DBResponseStatusCode(pgErr.Code))
		}
	} else if data.CommandTag.Select() {
		span.SetAttributes(semconv.DBResponseReturnedRows(int(data.CommandTag.RowsAffected())))
	}
	span.End()
}

// StatementName names a statement for its span: the sqlc query name when the SQL starts with
// sqlc's "-- name: X :kind" comment, else its first keyword in upper case, else "query".
func StatementName(sql string) string {
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		if i := strings.IndexAny(rest, " \t\r\n"); i > 0 {
			return rest[:i]
		}
	}
	if op := firstKeyword(sql); op != "" {
		return op
	}
	return "query"
}

// firstKeyword is the statement's first word after any comment lines, in upper case, or "".
func firstKeyword(sql string) string {
	for {
		sql = strings.TrimLeft(sql, " \t\r\n")
		if !strings.HasPrefix(sql, "--") {
			break
		}
		i := strings.IndexByte(sql, '\n')
		if i < 0 {
			return ""
		}
		sql = sql[i+1:]
	}
	n := 0
	for n < len(sql) && n < 16 && (sql[n] >= 'a' && sql[n] <= 'z' || sql[n] >= 'A' && sql[n] <= 'Z') {
		n++
	}
	return strings.ToUpper(sql[:n])
}
