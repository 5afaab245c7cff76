package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/limit"
	"github.com/better-compute/better-compute/internal/limit/limittest"
	"github.com/better-compute/better-compute/internal/poll"
)

// TestJoinGzipBombIsRefused: Join needs no client certificate, so anyone can send it gzip that
// inflates to a gigabyte. The gateway refuses it with RESOURCE_EXHAUSTED, promptly and without
// inflating it: a megabyte of gzip is cut off on the wire, and a bomb small enough to pass
// (62 KiB of gzip, 60 MiB inflated) is stopped by the decompressor at the message limit.
func TestJoinGzipBombIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw-bomb")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.bundle.RootPEM())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}

	for _, tc := range []struct {
		name     string
		inflated int64
		want     string // in the grpc-message
	}{
		{"larger than the body limit", 1 << 30, "request body too large"},
		{"within the message limit", 60 << 20, limit.ErrDecompressedTooLarge.Error()},
	} {
		bomb := limittest.GzipBomb(t, tc.inflated)
		// One gRPC message, as bcd sends it, marked compressed.
		var body bytes.Buffer
		body.WriteByte(1)
		_ = binary.Write(&body, binary.BigEndian, uint32(len(bomb)))
		body.Write(bomb)
		var status, message string
		start := time.Now()
		allocated := limittest.AllocatedDuring(func() {
			req, err := http.NewRequest(http.MethodPost, "https://"+gw.addr+"/bettercompute.daemon.v1.DaemonService/Join", &body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/grpc")
			req.Header.Set("Grpc-Encoding", "gzip")
			req.Header.Set("Te", "trailers")
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			_, _ = io.Copy(io.Discard, res.Body)
			status, message = res.Trailer.Get("Grpc-Status"), res.Trailer.Get("Grpc-Message")
			if status == "" { // a trailers-only answer
				status, message = res.Header.Get("Grpc-Status"), res.Header.Get("Grpc-Message")
			}
		})
		took := time.Since(start)
		if message, _ = url.PathUnescape(message); status != fmt.Sprint(int(connect.CodeResourceExhausted)) || !strings.Contains(message, tc.want) {
			t.Errorf("%s: grpc-status %q (%s), want %d (resource exhausted) and %q", tc.name, status, message, connect.CodeResourceExhausted, tc.want)
		}
		if allocated > uint64(tc.inflated)/2 {
			t.Errorf("%s: the process allocated %d MiB answering a bomb of %d MiB", tc.name, allocated>>20, tc.inflated>>20)
		}
		if took > 10*time.Second {
			t.Errorf("%s: took %s to refuse", tc.name, took)
		}
		t.Logf("%s: %d KiB refused in %s, %d MiB allocated meanwhile", tc.name, len(bomb)>>10, took.Round(time.Millisecond), allocated>>20)
	}
}

// sessionLimits are small limits for the session tests: a hello of 2 KiB, results of 4 KiB,
// events of 1 KiB, so Connect reads messages of up to about 4 KiB.
var sessionLimits = gateway.Limits{HelloBytes: 2048, ResultBytes: 4096, EventBytes: 1024}

func (e *env) startLimitedGateway(id string) string {
	e.t.Helper()
	return e.StartGateway(id, func(o *gateway.Options) { o.Limits = sessionLimits }).Addr
}

// runFake runs a joined FakeDaemon until the test ends.
func (e *env) runFake(addr string, opts daemon.FakeOptions) *daemon.Fake {
	e.t.Helper()
	opts.Dialer = daemon.Dialer{Gateway: addr}
	id, err := opts.Dialer.Join(ctx, e.bundle.RootPEM(), e.token(1, time.Now().Add(time.Hour)), "limited")
	if err != nil {
		e.t.Fatal(err)
	}
	f, err := daemon.NewFake(id, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.keepRunning(f)
	return f
}

// lastError waits until the daemon's last session error contains every part, and returns it.
func lastError(t *testing.T, f *daemon.Fake, parts ...string) error {
	t.Helper()
	var last error
	poll.Until(t, 15*time.Second, fmt.Sprintf("the daemon is told %q", parts), func() bool {
		last = f.Status().LastError
		if last == nil {
			return false
		}
		for _, p := range parts {
			if !strings.Contains(last.Error(), p) {
				return false
			}
		}
		return true
	})
	return last
}

// TestOversizedHelloIsRefused: a hello over limits.daemonHelloBytes is refused, and the daemon
// is told which limit it broke.
func TestOversizedHelloIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := e.startLimitedGateway("gw-hello")
	inv := &daemonv1.Inventory{Hostname: "big", Os: "linux"}
	for i := range 40 {
		inv.Gpus = append(inv.Gpus, &daemonv1.Gpu{Index: int32(i), Model: "NVIDIA H100 80GB HBM3", Uuid: fmt.Sprintf("GPU-%032d", i)})
	}
	f := e.runFake(addr, daemon.FakeOptions{Inventory: inv})
	err := lastError(t, f, "hello of", "limits.daemonHelloBytes")
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Errorf("error %v, want resource exhausted", err)
	}
	if f.Status().Sessions != 0 {
		t.Errorf("%d sessions opened, want none", f.Status().Sessions)
	}
}

// TestOversizedResultFailsTheCommand: the gateway announces limits.daemonResultBytes in its
// welcome, and a daemon whose command returns more reports the command failed, saying so,
// instead of sending a result that would end its session and be resent after every reconnect.
// The session stays up and carries the next command.
func TestOversizedResultFailsTheCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := e.startLimitedGateway("gw-result")
	f := e.runFake(addr, daemon.FakeOptions{Handlers: map[string]daemon.Handler{
		command.Echo: func(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
			n := int(c.GetEcho().GetData().GetFields()["bytes"].GetNumberValue())
			return structpb.NewStruct(map[string]any{"output": strings.Repeat("x", n)})
		},
	}})
	poll.Until(t, 10*time.Second, "the daemon connects", func() bool { return f.Status().Connected })
	big := e.command(f.Status().NodeID, command.Echo, `{"data": {"bytes": 8192}}`, "big-1")
	poll.Until(t, 15*time.Second, "the oversized command finishes", func() bool {
		state, _ := e.commandState(big)
		return state == "failed" || state == "succeeded"
	})
	var state, errText string
	if err := e.pool.QueryRow(ctx, "SELECT state, error FROM commands WHERE id = $1", big).Scan(&state, &errText); err != nil {
		t.Fatal(err)
	}
	want := "is over the gateway's limit of 4096 (limits.daemonResultBytes)"
	if state != "failed" || !strings.HasPrefix(errText, "result of ") || !strings.Contains(errText, want) {
		t.Errorf("command %s with error %q, want failed with %q", state, errText, want)
	}
	small := e.command(f.Status().NodeID, command.Echo, `{"data": {"bytes": 10}}`, "small-1")
	poll.Until(t, 15*time.Second, "the next command succeeds", func() bool {
		state, _ := e.commandState(small)
		return state == "succeeded"
	})
	if st := f.Status(); st.Sessions != 1 || !st.Connected || st.LastError != nil {
		t.Errorf("daemon %d sessions, connected %v, last error %v; want the first session still up", st.Sessions, st.Connected, st.LastError)
	}
}

// memRecord is an in-memory daemon.Recorder that starts with the results given and keeps what
// the agent records.
type memRecord struct {
	mu       sync.Mutex
	results  map[string]*daemonv1.CommandResult
	finished int
}

func (r *memRecord) Load(time.Time) ([]daemon.Recorded, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []daemon.Recorded
	for k, res := range r.results {
		out = append(out, daemon.Recorded{Key: k, Result: res, Finished: time.Now()})
	}
	return out, nil
}

func (r *memRecord) Started(string, *daemonv1.Command) error { return nil }

func (r *memRecord) Finished(key string, res *daemonv1.CommandResult) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results[key], r.finished = res, r.finished+1
	return nil
}

func (r *memRecord) get(key string) (*daemonv1.CommandResult, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[key], r.finished
}

// TestOversizedRecordedResultIsReplaced: a result recorded before the daemon knew the gateway's
// limit (by an older daemon, or for a gateway with a larger one), which it reports again on
// connecting, is sent as a failure that says so, and replaced in the record, so that it never
// ends a session.
func TestOversizedRecordedResultIsReplaced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := e.startLimitedGateway("gw-recorded")
	dialer := daemon.Dialer{Gateway: addr}
	id, err := dialer.Join(ctx, e.bundle.RootPEM(), e.token(1, time.Now().Add(time.Hour)), "recorded")
	if err != nil {
		t.Fatal(err)
	}
	cmd := sentCommand(t, e.pool, e.tenant, uuid.MustParse(id.NodeID), command.Echo)
	out, _ := structpb.NewStruct(map[string]any{"output": strings.Repeat("x", 8192)})
	rec := &memRecord{results: map[string]*daemonv1.CommandResult{
		cmd.String(): {CommandId: cmd.String(), Success: true, Result: out},
	}}
	a, err := daemon.NewAgent(daemon.Options{Dialer: dialer, Identity: id, Version: "test", Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(actx) }()
	t.Cleanup(func() { cancel(); <-done })

	poll.Until(t, 15*time.Second, "the recorded command finishes", func() bool {
		state, _ := e.commandState(cmd)
		return state == "failed" || state == "succeeded"
	})
	if state, _ := e.commandState(cmd); state != "failed" {
		t.Errorf("command %s, want failed", state)
	}
	got, finished := rec.get(cmd.String())
	if finished != 1 || got.GetSuccess() || got.GetResult() != nil || got.GetCommandId() != cmd.String() ||
		!strings.Contains(got.GetError(), "(limits.daemonResultBytes)") {
		t.Errorf("recorded %d times, now %v; want it replaced once by the failure", finished, got)
	}
	if st := a.Status(); st.Sessions != 1 || !st.Connected || st.LastError != nil {
		t.Errorf("daemon %d sessions, connected %v, last error %v; want the first session still up", st.Sessions, st.Connected, st.LastError)
	}
}

// TestOversizedEventEndsSession: over a raw session, an event over limits.daemonEventBytes (but
// within what Connect reads) and a message over every limit each end the session with a goodbye
// that names the limit, then RESOURCE_EXHAUSTED.
func TestOversizedEventEndsSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	addr := e.startLimitedGateway("gw-event")
	id, err := daemon.Dialer{Gateway: addr}.Join(ctx, e.bundle.RootPEM(), e.token(1, time.Now().Add(time.Hour)), "raw")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := id.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(e.bundle.RootPEM())
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}, Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP2(true)
	defer tr.CloseIdleConnections()
	client := connectClient(&http.Client{Transport: tr}, addr)

	for _, tc := range []struct {
		name    string
		payload int
		want    string
	}{
		{"event over its limit", 2 << 10, "limits.daemonEventBytes"},
		{"message over every limit", 64 << 10, "larger than the gateway's limit of"},
	} {
		stream, err := client.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Hello{Hello: &daemonv1.Hello{DaemonVersion: "raw"}}}); err != nil {
			t.Fatal(err)
		}
		res, err := stream.Receive()
		if err != nil || res.GetWelcome() == nil {
			t.Fatalf("%s: want a welcome, got %v, %v", tc.name, res, err)
		}
		if w := res.GetWelcome(); int(w.GetMaxResultBytes()) != sessionLimits.ResultBytes || int(w.GetMaxEventBytes()) != sessionLimits.EventBytes {
			t.Errorf("%s: welcome announces results of %d and events of %d bytes, want %d and %d", tc.name,
				w.GetMaxResultBytes(), w.GetMaxEventBytes(), sessionLimits.ResultBytes, sessionLimits.EventBytes)
		}
		data, _ := structpb.NewStruct(map[string]any{"blob": strings.Repeat("x", tc.payload)})
		if err := stream.Send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Event{Event: &daemonv1.Event{Type: "big", Data: data}}}); err != nil {
			t.Fatal(err)
		}
		var reason string
		for reason == "" {
			res, err := stream.Receive()
			if err != nil {
				t.Fatalf("%s: the stream ended without a goodbye: %v", tc.name, err)
			}
			reason = res.GetGoodbye().GetReason()
		}
		if !strings.Contains(reason, tc.want) {
			t.Errorf("%s: goodbye %q, want it to contain %q", tc.name, reason, tc.want)
		}
		if _, err := stream.Receive(); connect.CodeOf(err) != connect.CodeResourceExhausted {
			t.Errorf("%s: after the goodbye %v, want resource exhausted", tc.name, err)
		}
		_ = stream.CloseRequest()
		_ = stream.CloseResponse()
	}
	var events int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE type = 'node.big'").Scan(&events); err != nil || events != 0 {
		t.Errorf("%d oversized events recorded (%v), want none", events, err)
	}
}
