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
// only the handshake, against a plain TLS listener with the gateway's own configuration. Run
// both in one invocation and compare joins/s with handshakes/s.
func BenchmarkJoin(b *testing.B) {
	b.Run("handshake", func(b *testing.B) { benchHandshakes(b, gatewaytest.New(b)) })
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
}

func benchJoins(b *testing.B, e *gatewaytest.Env) {
	b.Helper()
	gw := e.StartGateway("bench", func(o *gateway.Options) { o.TenantNodes = 100_000 })
	token := e.Token(int32(min(b.N+64, 1<<30)), time.Now().Add(time.Hour))
	root := e.Bundle.RootPEM()
	b.ResetTimer()
	inFlight(b, "joins/s", func() error {
		_, err := (daemon.Dialer{Gateway: gw.Addr}).Join(ctx, root, token, "bench")
		return err
	})
}

// benchHandshakes runs full TLS 1.3 handshakes (no resumption) with a node's client
// certificate against a plain TLS listener on loopback configured by the gateway itself
// (Gateway.TLSConfig: its certificate and key, the node CAs it verifies client certificates
// against, its key exchanges), the client configured as a daemon's (TLS 1.3, h2, the root,
// the gateway's SPIFFE ID checked). A handshake counts once the gateway's side has verified
// the client's chain and said so with a byte.
func benchHandshakes(b *testing.B, e *gatewaytest.Env) {
	b.Helper()
	// The gateway's certificate and configuration as StartGateway makes them, without serving:
	// only its TLS configuration is used.
	certPEM, keyPEM, err := e.Bundle.IssueGateway("test", "bench", nil, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		b.Fatal(err)
	}
	gwCert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		b.Fatal(err)
	}
	serverCfg := gateway.New(gateway.Options{Pool: e.Pool, Authority: e.Bundle, ID: "bench", Region: "test", Certificate: gwCert}).TLSConfig()
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
	defer ln.Close() //nolint:errcheck // ends the accept loop
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
	b.ResetTimer()
	inFlight(b, "handshakes/s", func() error {
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
	})
}

// inFlight runs b.N calls of do, 32 at a time (the simulator's joins in flight), and reports
// their rate as metric and the CPU time a call took in this process and its database cluster
// (cpu-ms/op, when /proc can be read): on a machine shared with other work the rate moves with
// that work, the CPU time much less, and the ratio of two rates on saturated cores tends to the
// inverse ratio of their CPU times.
func inFlight(b *testing.B, metric string, do func() error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0, cpuOK := treeCPU()
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := do(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), metric)
	if cpu1, ok := treeCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
	}
}

// treeCPU is the CPU time (user and system) used so far by this process and by its live
// descendants (the test database's postmaster and backends) and the children they reaped, from
// getrusage and /proc; false where /proc cannot be read.
func treeCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	total := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
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
	self := os.Getpid()
	for pid, p := range procs {
		for a, hops := p.ppid, 0; a > 1 && hops < 64; a, hops = procs[a].ppid, hops+1 {
			if a == self && pid != self {
				total += p.cpu
				break
			}
		}
	}
	return total, true
}

// clockTick is the unit of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond
