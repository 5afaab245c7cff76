package doctor_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/internal/webhook"
)

// TestStrictOnALiveDeployment runs a gateway, a daemon and the sinks role, checks that doctor
// finds nothing wrong, then breaks one thing at a time: it must fail strict mode naming the
// cause after the sinks role stops, after a node goes silent, and after the PKI bundle is
// corrupted.
func TestStrictOnALiveDeployment(t *testing.T) {
	t.Parallel()
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", func(o *gateway.Options) { o.HeartbeatInterval = 200 * time.Millisecond })
	link := newLink(t, gw.Addr)
	f, err := daemon.JoinFake(ctx, e.Bundle.RootPEM(), e.Token(1, time.Now().Add(time.Hour)), "h1",
		daemon.FakeOptions{Dialer: daemon.Dialer{Gateway: link.addr, ServerName: "127.0.0.1"}})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stopDaemon := contextWithCancel()
	daemonDone := make(chan struct{})
	go func() { defer close(daemonDone); _ = f.Run(fctx) }()
	t.Cleanup(func() { stopDaemon(); link.thaw(); <-daemonDone })

	// A webhook, delivered by the sinks role.
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	t.Cleanup(receiver.Close)
	sealer, err := webhook.NewSealer(gatewaytest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7())
	if _, err := db.New(e.Pool).CreateWebhook(ctx, db.CreateWebhookParams{
		ID: id, TenantID: e.Tenant, Url: receiver.URL, EventTypes: []string{}, SecretSealed: webhook.SealSecret(sealer, id, webhook.NewSecret()),
	}); err != nil {
		t.Fatal(err)
	}
	startSinks := func() func() {
		sctx, cancel := contextWithCancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = sinks.Run(sctx, locks.NewHolder(e.Pool, "sinks-"+uuid.NewString()[:8], nil), e.Pool,
				sinks.Options{Sealer: sealer, AllowPrivate: true, Refresh: 50 * time.Millisecond, Poll: 20 * time.Millisecond})
		}()
		return func() { cancel(); <-done }
	}
	stopSinks := startSinks()
	t.Cleanup(func() { stopSinks() })
	if err := jobrun.Record(ctx, e.Pool, "command-sweeper", nil); err != nil {
		t.Fatal(err)
	}

	opts := doctor.Options{Pool: e.Pool, Secret: gatewaytest.Secret, SilentAfter: 2 * time.Second, LagAfter: 10 * time.Second}
	var last []doctor.Finding
	healthy := func() bool {
		last, err = doctor.Run(ctx, opts)
		return err == nil && doctor.Worst(last) == doctor.OK
	}
	poll.Until(t, 20*time.Second, "a healthy deployment", healthy, poll.Every(50*time.Millisecond), lastFindings(&last))

	// 1. The sinks role stops: nobody delivers the webhook.
	stopSinks()
	poll.Until(t, 20*time.Second, "doctor to notice the sinks role is gone", failsWith(&last, opts, "outbox delivery", "no process delivers webhook"), poll.Every(50*time.Millisecond), lastFindings(&last))
	stopSinks = startSinks()
	poll.Until(t, 20*time.Second, "health with the sinks role back", healthy, poll.Every(50*time.Millisecond), lastFindings(&last))

	// 2. The node goes silent: its connection stays up but carries nothing.
	link.freeze()
	poll.Until(t, 20*time.Second, "doctor to notice the silent node", failsWith(&last, opts, "silent nodes", "silent for over"), poll.Every(50*time.Millisecond), lastFindings(&last))
	link.thaw()
	poll.Until(t, 20*time.Second, "health with the node heard again", healthy, poll.Every(50*time.Millisecond), lastFindings(&last))

	// 3. The PKI bundle is corrupted.
	if _, err := e.Pool.Exec(ctx, `UPDATE pki_authorities SET sealed_key = '\x00'::bytea WHERE kind = 'node'`); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "doctor to notice the corrupted PKI", failsWith(&last, opts, "gateway authenticates daemons", "pki"), poll.Every(50*time.Millisecond), lastFindings(&last))
}

// failsWith reports whether doctor's worst finding is check, not ok, with a cause containing
// want.
func failsWith(last *[]doctor.Finding, opts doctor.Options, check, want string) func() bool {
	return func() bool {
		fs, err := doctor.Run(ctx, opts)
		if err != nil {
			return false
		}
		*last = fs
		for _, f := range fs {
			if f.Check == check && f.Severity != doctor.OK && strings.Contains(f.Cause, want) {
				return doctor.Worst(fs) != doctor.OK
			}
		}
		return false
	}
}

// link is a TCP pass-through that can be frozen: the connection stays open but no bytes move,
// as in a network partition.
type link struct {
	addr string
	mu   sync.Mutex
	open chan struct{} // closed while bytes may flow
}

func newLink(t *testing.T, target string) *link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &link{addr: ln.Addr().String(), open: make(chan struct{})}
	close(l.open)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go l.pipe(up, c)
			go l.pipe(c, up)
		}
	}()
	return l
}

func (l *link) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			l.mu.Lock()
			open := l.open
			l.mu.Unlock()
			<-open
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *link) freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
		l.open = make(chan struct{})
	default:
	}
}

func (l *link) thaw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
	default:
		close(l.open)
	}
}

// lastFindings reports the last findings doctor returned when a wait times out.
func lastFindings(last *[]doctor.Finding) poll.Option {
	return poll.Report(func() string { return fmt.Sprintf("last findings:\n%+v", *last) })
}
