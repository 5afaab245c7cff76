package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// install turns tracing on with an in-memory exporter until the test ends.
func install(t *testing.T) *tracetest.InMemoryExporter {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(tracing.Install(tp))
	return exp
}

func TestStatementName(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"-- name: GetNode :one\nSELECT * FROM nodes WHERE id = $1": "GetNode",
		"-- name: ListenReconcile :exec\nLISTEN bc_reconcile":      "ListenReconcile",
		"begin":    "BEGIN",
		"  commit": "COMMIT",
		"-- a comment\n-- another\nCREATE TABLE x": "CREATE",
		"select 'secret-value'":                    "SELECT",
		"":                                         "query",
		"-- only a comment":                        "query",
		"(SELECT 1)":                               "query",
	} {
		if got := tracing.StatementName(sql); got != want {
			t.Errorf("StatementName(%q) = %q, want %q", sql, got, want)
		}
	}
}

func TestOffByDefault(t *testing.T) { //nolint:paralleltest // tracing.Setup sets the global OpenTelemetry provider
	if tracing.Enabled() || tracing.Provider() != nil {
		t.Fatal("tracing is on before anything turned it on")
	}
	shutdown, err := tracing.Setup(t.Context(), tracing.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tracing.Enabled() {
		t.Error("Setup without an endpoint turned tracing on")
	}
	if err := shutdown(t.Context()); err != nil {
		t.Error(err)
	}
	if _, span := tracing.Tracer().Start(t.Context(), "x"); span.IsRecording() {
		t.Error("the tracer records while tracing is off")
	}
}

func TestSetup(t *testing.T) { //nolint:paralleltest // tracing.Setup sets the global OpenTelemetry provider
	for _, bad := range []tracing.Options{{Endpoint: "collector:4318"}, {Endpoint: "ftp://c"}} {
		if _, err := tracing.Setup(t.Context(), bad); err == nil {
			t.Errorf("Setup(%+v) accepted", bad)
		}
	}
	exp := keep{tracetest.NewInMemoryExporter()}
	shutdown, err := tracing.Setup(t.Context(), tracing.Options{
		Exporter: exp, SampleRatio: 1, Roles: []string{"api", "gateway"}, InstanceID: "host-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !tracing.Enabled() {
		t.Fatal("Setup with an exporter left tracing off")
	}
	_, span := tracing.Tracer().Start(t.Context(), "work")
	span.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if tracing.Enabled() {
		t.Error("tracing is still on after shutdown")
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want 1", len(spans))
	}
	attrs := map[string]string{}
	for _, kv := range spans[0].Resource.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["service.name"] != tracing.ServiceName || attrs[string(tracing.RolesAttribute)] != `["api","gateway"]` || attrs["service.instance.id"] != "host-1" {
		t.Errorf("resource %v", attrs)
	}

	// A zero ratio records no new trace.
	exp.Reset()
	shutdown, err = tracing.Setup(t.Context(), tracing.Options{Exporter: exp, SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	_, span = tracing.Tracer().Start(t.Context(), "work")
	span.End()
	_ = shutdown(t.Context())
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("sample ratio 0 exported %d spans", n)
	}
}

// keep is an in-memory exporter whose spans outlive the provider's shutdown.
type keep struct{ *tracetest.InMemoryExporter }

func (keep) Shutdown(context.Context) error { return nil }

func TestLogHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	install(t)

	log.InfoContext(t.Context(), "outside")
	ctx, span := tracing.Tracer().Start(t.Context(), "work")
	log.InfoContext(ctx, "inside", "k", "v")
	span.End()

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	var outside, inside map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &outside); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &inside); err != nil {
		t.Fatal(err)
	}
	if _, ok := outside["trace_id"]; ok {
		t.Errorf("a line outside any span has a trace id: %v", outside)
	}
	sc := span.SpanContext()
	if inside["trace_id"] != sc.TraceID().String() || inside["span_id"] != sc.SpanID().String() || inside["component"] != "test" || inside["k"] != "v" {
		t.Errorf("line inside the span: %v", inside)
	}
}

// TestAPICallTrace: with tracing on, an API call is a server span whose children include the
// database statements it ran (the guard's authentication), named after their sqlc queries, and
// the log handler finds nothing to add outside it.
func TestAPICallTrace(t *testing.T) { //nolint:paralleltest // tracing.Setup sets the global OpenTelemetry provider
	exp := install(t)
	env := servertest.New(t)
	exp.Reset() // minting the admin key ran outside any span; nothing to keep

	if _, err := env.IAM(env.AdminKey).WhoAmI(t.Context(), &iamv1.WhoAmIRequest{}); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	var server *tracetest.SpanStub
	for i := range spans {
		if spans[i].SpanKind == trace.SpanKindServer {
			if server != nil {
				t.Fatalf("two server spans: %s and %s", server.Name, spans[i].Name)
			}
			server = &spans[i]
		}
	}
	if server == nil {
		t.Fatalf("no server span among %d spans", len(spans))
	}
	if server.Name != "bettercompute.iam.v1.IamService/WhoAmI" {
		t.Errorf("server span %q", server.Name)
	}
	var children []string
	for _, s := range spans {
		if s.Parent.SpanID() == server.SpanContext.SpanID() && s.SpanContext.TraceID() == server.SpanContext.TraceID() {
			children = append(children, s.Name)
			if s.SpanKind != trace.SpanKindClient {
				t.Errorf("database span %s has kind %v", s.Name, s.SpanKind)
			}
			attrs := map[string]string{}
			for _, kv := range s.Attributes {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			if attrs["db.system.name"] != "postgresql" || attrs["db.query.summary"] != s.Name || attrs["db.namespace"] == "" {
				t.Errorf("database span %s attributes %v", s.Name, attrs)
			}
			for k, v := range attrs {
				if strings.Contains(v, "SELECT") && k != "db.operation.name" {
					t.Errorf("span %s records SQL text in %s: %q", s.Name, k, v)
				}
			}
		}
	}
	if len(children) == 0 {
		t.Fatalf("the server span has no database child; spans: %v", names(spans))
	}
	for _, c := range children {
		if c == "" || strings.ContainsAny(c, " \n$") {
			t.Errorf("database span name %q is not a statement name", c)
		}
	}
	t.Logf("server span %s with database children %v", server.Name, children)
	attrs := map[string]string{}
	for _, kv := range server.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	if attrs["better_compute.method"] != "iam/whoAmI" || attrs["better_compute.request_id"] == "" {
		t.Errorf("server span attributes %v", attrs)
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
