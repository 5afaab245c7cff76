package gateway_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestObservability follows one command through the API and a gateway with metrics and tracing
// on: the gateway's sessions and dispatch latency appear at the API's /metrics, and the dispatch
// is a span with a span per command and the statements it ran as children.
func TestObservability(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	t.Cleanup(tracing.Install(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))))

	e := gatewaytest.New(t)
	reg := metrics.NewRegistry()
	// The loop is slowed down: the notifier's poke dispatches.
	gw := e.StartGateway("gw-obs", func(o *gateway.Options) { o.Metrics = reg; o.DispatchInterval = 30 * time.Second })
	notifier, err := gateway.NewNotifier(e.Pool, e.Bundle, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Wait)
	api := servertest.Start(t, e.Pool, func(o *server.Options) { o.Notifier = notifier; o.Metrics = reg })

	scrape := func() map[string]*dto.MetricFamily {
		t.Helper()
		res, err := http.Get(api.Server.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return fams
	}
	sessions := func() float64 { return scrape()["bc_gateway_sessions"].GetMetric()[0].GetGauge().GetValue() }
	if n := sessions(); n != 0 {
		t.Errorf("sessions before any daemon: %v", n)
	}

	f, err := daemon.JoinFake(ctx, e.Bundle.RootPEM(), e.Token(1, time.Now().Add(time.Hour)), "host-obs", daemon.FakeOptions{Dialer: daemon.Dialer{Gateway: gw.Addr}})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stopFake := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = f.Run(fctx) }()
	t.Cleanup(func() { stopFake(); <-done })
	poll.Until(t, 10*time.Second, "the daemon connects", func() bool { return f.Status().Connected })
	if n := sessions(); n != 1 {
		t.Errorf("sessions with one daemon: %v", n)
	}

	exp.Reset()
	commands := commandsv1connect.NewCommandsServiceClient(api.HTTPClient(api.AdminKey), api.URL)
	created, err := commands.Create(ctx, &commandsv1.CreateRequest{NodeId: f.Status().NodeID, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetCommands()[0].GetId()
	poll.Until(t, 10*time.Second, "the command succeeds", func() bool {
		res, err := commands.Get(ctx, &commandsv1.GetRequest{Id: id})
		return err == nil && res.GetCommand().GetState() == commandsv1.CommandState_COMMAND_STATE_SUCCEEDED
	})

	fams := scrape()
	if h := fams["bc_gateway_dispatch_latency_seconds"].GetMetric()[0].GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() < 0 || h.GetSampleSum() > 10 {
		t.Errorf("dispatch latency: %d commands, %vs", h.GetSampleCount(), h.GetSampleSum())
	}
	var created1 float64
	for _, m := range fams["bc_api_requests_total"].GetMetric() {
		if labels(m) == "method=commands/create,code=ok" {
			created1 = m.GetCounter().GetValue()
		}
	}
	if created1 != 1 {
		t.Errorf("bc_api_requests_total{commands/create,ok} = %v", created1)
	}

	// The traces: the API call, and the gateway's dispatch of the command.
	spans := exp.GetSpans()
	byID := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID().String()] = s
	}
	childrenOf := func(s tracetest.SpanStub) []string {
		var out []string
		for _, c := range spans {
			if c.Parent.SpanID() == s.SpanContext.SpanID() {
				out = append(out, c.Name)
			}
		}
		return out
	}
	var apiSpan, commandSpan *tracetest.SpanStub
	for i, s := range spans {
		switch s.Name {
		case "bettercompute.commands.v1.CommandsService/Create":
			apiSpan = &spans[i]
		case "gateway.dispatch_command":
			for _, kv := range s.Attributes {
				if kv.Key == "better_compute.command.id" && kv.Value.AsString() == id {
					commandSpan = &spans[i]
				}
			}
		}
	}
	if apiSpan == nil || len(childrenOf(*apiSpan)) == 0 {
		t.Fatalf("no commands/create span with database children among %v", spanNames(spans))
	}
	t.Logf("commands/create: %v", childrenOf(*apiSpan))
	if commandSpan == nil {
		t.Fatalf("no gateway.dispatch_command span for %s among %v", id, spanNames(spans))
	}
	round, ok := byID[commandSpan.Parent.SpanID().String()]
	if !ok || round.Name != "gateway.dispatch" {
		t.Fatalf("the command's span has parent %q", round.Name)
	}
	kids := childrenOf(round)
	t.Logf("gateway.dispatch: %v", kids)
	if !slices.Contains(kids, "ClaimPendingCommands") || !slices.Contains(kids, "gateway.dispatch_command") {
		t.Errorf("gateway.dispatch children %v, want ClaimPendingCommands and gateway.dispatch_command", kids)
	}

	stopFake()
	<-done
	poll.Until(t, 10*time.Second, "the session ends", func() bool { return sessions() == 0 })
}

func labels(m *dto.Metric) string {
	s := ""
	for i, l := range m.Label {
		if i > 0 {
			s += ","
		}
		s += l.GetName() + "=" + l.GetValue()
	}
	return s
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}
