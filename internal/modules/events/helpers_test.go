package events

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/internal/modules/events/migrations"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/module"
)

// The environment of a sinks process that a test starts by running its own binary again: the
// database and NATS URLs. With childDB set, TestMain runs the sinks role instead of the tests.
const (
	childDB   = "BC_EVENTS_TEST_SINKS_DB"
	childNATS = "BC_EVENTS_TEST_SINKS_NATS"
)

func TestMain(m *testing.M) {
	if os.Getenv(childDB) != "" {
		os.Exit(sinksProcess(os.Getenv(childDB), os.Getenv(childNATS)))
	}
	dbtest.Main(m)
}

const testSecret = "test-secret-0123456789abcdef-0123456789"

// sinksProcess runs the sinks role with the module's sink until it is signalled (or killed).
func sinksProcess(dbURL, natsURL string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	pool, err := database.Open(ctx, dbURL)
	if err != nil {
		log.Error("open database", "err", err)
		return 1
	}
	defer pool.Close()
	m := testModule(natsURL)
	w, err := m.Workers(module.Worker{Pool: pool, Logger: log, Metrics: metrics.NewRegistry()})
	if err != nil {
		log.Error("workers", "err", err)
		return 1
	}
	holder := locks.NewHolder(pool, "sinks-"+strconv.Itoa(os.Getpid()), log)
	if err := sinks.Run(ctx, holder, pool, runOptions(w.Sinks, log)); err != nil {
		log.Error("sinks", "err", err)
		return 1
	}
	return 0
}

// runOptions are the sinks role's options in these tests: quick to poll, retry and take over a
// dead process's lease.
func runOptions(ss []sinks.Sink, log *slog.Logger) sinks.Options {
	sealer, err := webhook.NewSealer(testSecret)
	if err != nil {
		panic(err)
	}
	return sinks.Options{Sealer: sealer, Sinks: ss, Logger: log, Poll: 10 * time.Millisecond, Refresh: time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, LeaseTTL: 1500 * time.Millisecond}
}

// testModule is the module configured for a test server.
func testModule(natsURL string) *Module {
	m := New()
	m.cfg.URL = natsURL
	return m
}

// natsServer is an in-process NATS server with JetStream, its store in a directory of the test's.
type natsServer struct {
	t    testing.TB
	dir  string
	port int
	srv  *natsserver.Server
}

// startNATS starts a server on a free port.
func startNATS(t testing.TB) *natsServer {
	t.Helper()
	n := &natsServer{t: t, dir: t.TempDir()}
	n.start(-1)
	t.Cleanup(n.stop)
	return n
}

// start starts the server on port (-1: a free one), on the same store.
func (n *natsServer) start(port int) {
	n.t.Helper()
	srv, err := natsserver.NewServer(&natsserver.Options{
		Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: n.dir,
		JetStreamMaxStore: 1 << 30, JetStreamMaxMemory: 64 << 20, NoLog: true, NoSigs: true,
	})
	if err != nil {
		n.t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(60 * time.Second) {
		n.t.Fatal("nats: not ready within 10s")
	}
	n.srv, n.port = srv, srv.Addr().(*net.TCPAddr).Port
}

// stop shuts the server down, if it runs.
func (n *natsServer) stop() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
		n.srv = nil
	}
}

// url is the server's client URL.
func (n *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.port) }

// messages is how many messages the stream holds; -1 when it cannot be read (the server is down).
func (n *natsServer) messages(stream string) int64 {
	nc, err := nats.Connect(n.url(), nats.NoReconnect(), nats.Timeout(time.Second))
	if err != nil {
		return -1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	return int64(st.CachedInfo().State.Msgs)
}

// migratedPool is a fresh database with the module's migrations, and its URL.
func migratedPool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	u := dbtest.URL(t)
	pool, err := database.Open(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	err = migrate.ApplyAll(context.Background(), pool, slog.New(slog.DiscardHandler), []migrate.ModuleMigrations{{Name: Name, FS: migrations.FS}})
	if err != nil {
		t.Fatal(err)
	}
	// The sink gets what is committed after its cursor exists.
	if err := db.New(pool).EnsureSinkCursor(context.Background(), db.EnsureSinkCursorParams{Sink: SinkName}); err != nil {
		t.Fatal(err)
	}
	return pool, u
}

// eventTypes are the types a burst's events take in turn, so one outbox subject's events go to
// several NATS subjects.
var eventTypes = []string{"node.ready", "node.updated", "lease.granted"}

// burst commits n events in one transaction over subjects outbox subjects spread over tenants,
// each event carrying its place in its subject ({"seq": 1, 2, …}).
func burst(t testing.TB, pool *pgxpool.Pool, tenants []uuid.UUID, subjects, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO outbox (tenant_id, type, subject, payload)
		SELECT ($1::uuid[])[(i % $2) % cardinality($1::uuid[]) + 1], ($4::text[])[i % cardinality($4::text[]) + 1],
		       'node/' || (i % $2), jsonb_build_object('seq', i / $2 + 1)
		FROM generate_series(0, $3::int - 1) AS i
		ORDER BY i`, tenants, subjects, n, eventTypes)
	if err != nil {
		t.Fatal(err)
	}
}

func newTenants(n int) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.New()
	}
	return out
}

// checkStream reads the whole stream back and checks that it holds want messages: each with its
// Nats-Msg-Id, headers and the webhook body, on its tenant's and type's subject, no id twice,
// and every outbox subject's events in order without a gap.
func checkStream(t testing.TB, n *natsServer, cfg *Config, want int) {
	t.Helper()
	nc, err := nats.Connect(n.url())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().State.Msgs; got != uint64(want) {
		t.Fatalf("the stream holds %d messages, want %d", got, want)
	}
	cons, err := js.OrderedConsumer(ctx, cfg.Stream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	next := map[string]int{} // tenant/subject -> the next seq
	for read := 0; read < want; {
		batch, err := cons.Fetch(min(1000, want-read), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			h := msg.Headers()
			id := h.Get(jetstream.MsgIDHeader)
			if id == "" || ids[id] {
				t.Fatalf("message %d: Nats-Msg-Id %q empty or seen before", read+got, id)
			}
			ids[id] = true
			var body struct {
				Type, Subject, Timestamp string
				Data                     struct{ Seq int }
			}
			if err := json.Unmarshal(msg.Data(), &body); err != nil {
				t.Fatalf("message %s: %v", id, err)
			}
			tenant := h.Get(HeaderTenant)
			if body.Type != h.Get(HeaderType) || body.Subject != h.Get(HeaderSubject) || h.Get(HeaderTime) == "" ||
				msg.Subject() != cfg.SubjectPrefix+"."+tenant+"."+body.Type {
				t.Fatalf("message %s on %s: headers %v, body %s", id, msg.Subject(), h, msg.Data())
			}
			key := tenant + "/" + body.Subject
			if next[key] == 0 {
				next[key] = 1
			}
			if body.Data.Seq != next[key] {
				t.Fatalf("subject %s: event %d after %d", key, body.Data.Seq, next[key]-1)
			}
			next[key]++
		}
		if err := batch.Error(); err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			t.Fatalf("read %d of %d messages", read, want)
		}
		read += got
	}
}
