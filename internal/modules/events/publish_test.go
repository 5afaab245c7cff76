package events

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	eventsdb "github.com/better-compute/better-compute/gen/modules/events/db"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/module"
)

const burstSize = 10_000

// runSinks runs the sinks role in the test's process with the module's sink for cfg's server,
// until the test ends.
func runSinks(t *testing.T, pool *pgxpool.Pool, m *Module) *Sink {
	t.Helper()
	w, err := m.Workers(module.Worker{Pool: pool, Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Sinks) != 1 || w.Sinks[0].Name() != "events:nats" {
		t.Fatalf("sinks %v", w.Sinks)
	}
	sink := w.Sinks[0].(*Sink)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sinks.Run(ctx, locks.NewHolder(pool, "sinks-"+t.Name(), nil), pool, runOptions(w.Sinks, slog.New(slog.DiscardHandler)))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if err := sink.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return sink
}

// waitAll waits until the stream holds want messages.
func waitAll(t *testing.T, n *natsServer, cfg *Config, want int64) {
	t.Helper()
	poll.Until(t, 120*time.Second, "every event in the stream", func() bool { return n.messages(cfg.Stream) >= want },
		poll.Every(50*time.Millisecond), poll.Report(func() string { return "the stream holds " + strconv.FormatInt(n.messages(cfg.Stream), 10) }))
}

// TestBurstArrivesInOrder: 10,000 events over 500 outbox subjects of 7 tenants, committed at
// once, all reach the stream, each subject's in order, none twice; the status row counts them.
func TestBurstArrivesInOrder(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	n := startNATS(t)
	m := testModule(n.url())
	sink := runSinks(t, pool, m)

	burst(t, pool, newTenants(7), 500, burstSize)
	waitAll(t, n, &m.cfg, burstSize)
	checkStream(t, n, &m.cfg, burstSize)
	if got := sink.in.published.Value(); got != burstSize {
		t.Fatalf("published metric %v", got)
	}
	poll.Until(t, 60*time.Second, "the status row counting every event", func() bool {
		st, err := eventsdb.New(pool).GetNatsStatus(context.Background(), SinkName)
		return err == nil && st.Published == burstSize && st.LastError == "" && st.LastStreamSeq == burstSize && st.Stream == "BC_EVENTS"
	})
}

// TestKilledSinksProcessLosesAndRepeatsNothing: a sinks process killed (SIGKILL) while it
// publishes a burst leaves the rest to the next process, which takes over its lease: the stream
// ends with every event once, in order per subject.
func TestKilledSinksProcessLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	pool, dbURL := migratedPool(t)
	n := startNATS(t)
	cfg := testModule(n.url()).cfg

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childDB+"="+dbURL, childNATS+"="+n.url())
		cmd.Stderr = &logTail{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	first := start()
	var once sync.Once
	kill := func() {
		once.Do(func() {
			_ = first.Process.Kill()
			_ = first.Wait()
		})
	}
	t.Cleanup(kill)

	burst(t, pool, newTenants(5), 400, burstSize)
	// Killed inside a batch of the dispatcher's (1,000 events), before it stores its cursor: the
	// next process publishes the batch's first events again, and the stream drops them.
	poll.Until(t, 120*time.Second, "the first process inside its fourth batch", func() bool {
		c := n.messages(cfg.Stream)
		return c > 3000 && c%1000 != 0
	}, poll.Every(2*time.Millisecond))
	kill()
	t.Logf("killed the first sinks process with %d messages in the stream", n.messages(cfg.Stream))

	second := start()
	t.Cleanup(func() {
		_ = second.Process.Signal(os.Interrupt)
		if err := second.Wait(); err != nil {
			t.Errorf("second sinks process: %v\n%s", err, second.Stderr)
		}
	})
	waitAll(t, n, &cfg, burstSize)
	checkStream(t, n, &cfg, burstSize)
}

// TestNATSRestartIsSurvived: NATS shut down while a burst is published, then started again on
// the same port and store, gets every event once.
func TestNATSRestartIsSurvived(t *testing.T) {
	t.Parallel()
	pool, _ := migratedPool(t)
	n := startNATS(t)
	m := testModule(n.url())
	sink := runSinks(t, pool, m)

	burst(t, pool, newTenants(3), 300, burstSize)
	poll.Until(t, 120*time.Second, "publishing under way", func() bool { return n.messages(m.cfg.Stream) >= 3000 }, poll.Every(5*time.Millisecond))
	n.stop()
	poll.Until(t, 60*time.Second, "a publish failing while NATS is down", func() bool { return sink.in.failures.Value() > 0 })
	n.start(n.port)
	waitAll(t, n, &m.cfg, burstSize)
	checkStream(t, n, &m.cfg, burstSize)
}

// logTail keeps a child process's last log lines, for a failure message.
type logTail struct {
	mu  sync.Mutex
	buf []byte
}

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if len(l.buf) > 8192 {
		l.buf = l.buf[len(l.buf)-8192:]
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
