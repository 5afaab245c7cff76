package gateway_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/pki/spiffeid"
)

// BenchmarkJoin measures joins through one gateway on loopback TLS, 32 in flight as the
// simulator's default, each a fresh key, CSR, handshake and join transaction. The daemons' side
// runs in the same process, so a CPU profile shows both; joins/s is the figure.
//
// handshake is its reference (issue 37: joins at least half the rate of bare TLS 1.3
// handshakes with client certificates): the same process, cores, 32 in flight and keys, but
// only the handshake, against a plain TLS listener with the gateway's own configuration.
// join-vs-handshake runs b.N of each in alternating batches, so that both see the same load of
// a shared machine, and reports the ratio of their rates and the CPU time of each.
func BenchmarkJoin(b *testing.B) {
	b.Run("handshake", func(b *testing.B) {
		hs := handshaker(b, gatewaytest.New(b))
		b.ResetTimer()
		rate, cpu := inFlight(b, b.N, hs)
		report(b, b.N, rate, cpu, "handshakes/s")
	})
	b.Run("nodes=0", func(b *testing.B) { benchJoins(b, gatewaytest.New(b)) })
	// The tenant has 10,000 nodes whose rows heartbeats rewrote five times over (issue 18).
	b.Run("nodes=10000", func(b *testing.B) {
		e := gatewaytest.New(b)
		if _, err := e.Pool.Exec(ctx, `INSERT INTO nodes (id, tenant_id, state)
			SELECT gen_random_uuid(), $1, 'ready' FROM generate_series(1, 10000)`, e.Tenant); err != nil {
			b.Fatal(err)
		}
		for range 5 {
			if _, err := e.Pool.Exec(ctx, "INSERT INTO node_liveness (node_id, last_seen_at) SELECT id, now() FROM nodes ON CONFLICT (node_id) DO UPDATE SET last_seen_at = now()"); err != nil {
				b.Fatal(err)
			}
		}
		benchJoins(b, e)
	})
	b.Run("join-vs-handshake", func(b *testing.B) {
		e := gatewaytest.New(b)
		join, hs := joiner(b, e), handshaker(b, e)
		const batch = 256
		var joinTime, hsTime time.Duration
		var joinCPU, hsCPU cpuTime
		b.ResetTimer()
		for done := 0; done < b.N; done += batch {
			n := min(batch, b.N-done)
			t, c := timed(b, n, join)
			joinTime, joinCPU = joinTime+t, joinCPU.add(c)
			t, c = timed(b, n, hs)
			hsTime, hsCPU = hsTime+t, hsCPU.add(c)
		}
		joins, handshakes := float64(b.N)/joinTime.Seconds(), float64(b.N)/hsTime.Seconds()
		b.ReportMetric(joins, "joins/s")
		b.ReportMetric(handshakes, "handshakes/s")
		b.ReportMetric(joins/handshakes, "joins/handshake")
		if joinCPU.ok && hsCPU.ok {
			b.ReportMetric(joinCPU.perOp(b.N), "cpu-ms/join")
			b.ReportMetric(hsCPU.perOp(b.N), "cpu-ms/handshake")
			b.ReportMetric(float64(joinCPU.db)/float64(time.Millisecond)/float64(b.N), "db-cpu-ms/join")
		}
	})
}

func benchJoins(b *testing.B, e *gatewaytest.Env) {
	b.Helper()
	join := joiner(b, e)
	b.ResetTimer()
	rate, cpu := inFlight(b, b.N, join)
	report(b, b.N, rate, cpu, "joins/s")
}

// joiner starts a gateway on e and returns a join through it with a token good for b.N+64.
func joiner(b *testing.B, e *gatewaytest.Env) func() error {
	b.Helper()
	gw := e.StartGateway("bench", func(o *gateway.Options) { o.TenantNodes = 100_000 })
	token := e.Token(int32(min(b.N+64, 1<<30)), time.Now().Add(time.Hour))
	root := e.Bundle.RootPEM()
	return func() error {
		_, err := (daemon.Dialer{Gateway: gw.Addr}).Join(ctx, root, token, "bench")
		return err
	}
}

// handshaker returns a full TLS 1.3 handshake (no resumption) with a node's client
// certificate against a plain TLS listener on loopback configured by the gateway itself
// (Gateway.TLSConfig: its certificate and key, the node CAs it verifies client certificates
// against, its key exchanges), the client configured as a daemon's (TLS 1.3, h2, the root,
// the gateway's SPIFFE ID checked). A handshake counts once the gateway's side has verified
// the client's chain and said so with a byte.
func handshaker(b *testing.B, e *gatewaytest.Env) func() error {
	b.Helper()
	// The gateway's certificate and configuration as StartGateway makes them, without serving:
	// only its TLS configuration is used.
	certPEM, keyPEM, err := e.Bundle.IssueGateway("test", "bench-tls", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		b.Fatal(err)
	}
	gwCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	serverCfg := gateway.New(gateway.Options{Pool: e.Pool, Authority: e.Bundle, ID: "bench-tls", Region: "test", Certificate: gwCert}).TLSConfig()
	key, err := daemon.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	csr, err := daemon.NewCSR(key, "bench")
	if err != nil {
		b.Fatal(err)
	}
	chain, _, err := e.Bundle.IssueNode(csr, "0190a5a0-0000-7000-8000-000000000001", 0)
	if err != nil {
		b.Fatal(err)
	}
	cert, err := (&daemon.Identity{Key: key, ChainPEM: chain}).Certificate()
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer raw.Close() //nolint:errcheck // the connection's only use is done
				tc := tls.Server(raw, serverCfg)
				if err := tc.HandshakeContext(ctx); err != nil || len(tc.ConnectionState().VerifiedChains) == 0 {
					return
				}
				_, _ = tc.Write([]byte{1})
			}()
		}
	}()
	clientCfg := &tls.Config{
		MinVersion: tls.VersionTLS13, RootCAs: e.Bundle.RootPool(), ServerName: "127.0.0.1",
		NextProtos: []string{"h2"}, Certificates: []tls.Certificate{cert},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := spiffeid.GatewayOf(cs.PeerCertificates[0], "")
			return err
		},
	}
	addr := ln.Addr().String()
	return func() error {
		c, err := tls.Dial("tcp", addr, clientCfg)
		if err != nil {
			return err
		}
		defer c.Close() //nolint:errcheck // the connection's only use is done
		var one [1]byte
		if _, err := io.ReadFull(c, one[:]); err != nil {
			return fmt.Errorf("the gateway's side did not finish: %w", err)
		}
		return nil
	}
}

// inFlight runs n calls of do, 32 at a time (the simulator's joins in flight), and returns
// their rate and the CPU time they took.
func inFlight(b *testing.B, n int, do func() error) (perSecond float64, cpu cpuTime) {
	b.Helper()
	took, cpu := timed(b, n, do)
	return float64(n) / took.Seconds(), cpu
}

// timed runs n calls of do, 32 at a time, and returns the time and CPU time they took.
func timed(b *testing.B, n int, do func() error) (time.Duration, cpuTime) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	before := treeCPU()
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := do(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	return took, treeCPU().sub(before)
}

// report reports a rate as metric and the CPU time of a call in this process and its database
// cluster (cpu-ms/op, of which db-cpu-ms/op the cluster's, when /proc can be read): on a
// machine shared with other work the rate moves with that work, the CPU time much less, and the
// ratio of two rates on saturated cores tends to the inverse ratio of their CPU times.
func report(b *testing.B, n int, perSecond float64, cpu cpuTime, metric string) {
	b.Helper()
	b.ReportMetric(perSecond, metric)
	if cpu.ok {
		b.ReportMetric(cpu.perOp(n), "cpu-ms/op")
		b.ReportMetric(float64(cpu.db)/float64(time.Millisecond)/float64(n), "db-cpu-ms/op")
	}
}

// cpuTime is CPU time (user and system) of this process (self) and its database cluster (db).
type cpuTime struct {
	self, db time.Duration
	ok       bool
}

func (c cpuTime) sub(d cpuTime) cpuTime {
	return cpuTime{self: c.self - d.self, db: c.db - d.db, ok: c.ok && d.ok}
}

func (c cpuTime) add(d cpuTime) cpuTime {
	return cpuTime{self: c.self + d.self, db: c.db + d.db, ok: (c.ok || c == cpuTime{}) && d.ok}
}

// perOp is the CPU time of one of n calls in milliseconds, the process's and the database's.
func (c cpuTime) perOp(n int) float64 {
	return float64(c.self+c.db) / float64(time.Millisecond) / float64(n)
}

// treeCPU is the CPU time (user and system) used so far by this process (self), and by its
// live descendants (the test database's postmaster and backends) and the children they reaped
// (db), from getrusage and /proc; not ok where /proc cannot be read.
func treeCPU() cpuTime {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTime{}
	}
	c := cpuTime{self: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ok: true}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return cpuTime{}
	}
	type proc struct {
		ppid int
		cpu  time.Duration
	}
	procs := map[int]proc{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// The command, in parentheses, may hold spaces: count the fields after it.
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:])) // f[0] is field 3 of proc(5), the state
		if i < 0 || len(f) < 15 {
			continue
		}
		var n [15]int64
		for _, k := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
			n[k], _ = strconv.ParseInt(f[k], 10, 64)
		}
		procs[pid] = proc{ppid: int(n[1]), cpu: time.Duration(n[11]+n[12]+n[13]+n[14]) * clockTick}
	}
	me := os.Getpid()
	for pid, p := range procs {
		for a, hops := p.ppid, 0; a > 1 && hops < 64; a, hops = procs[a].ppid, hops+1 {
			if a == me && pid != me {
				c.db += p.cpu
				break
			}
		}
	}
	return c
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond
