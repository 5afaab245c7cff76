// Package bench_test measures the API against the database it runs on: authenticated reads and
// admission writes over real HTTP, pgbench's simple-update on the same private PostgreSQL cluster
// (fsync, synchronous_commit and full_page_writes off, as dbtest starts it), and pgbench
// replaying CreateTenant's and leases/create's own SQL, so the API's write rate can be set
// against what the database does without it. pgbench is taken from beside the server's binaries,
// or else from PATH.
//
//	go test -run '^$' -bench . -benchtime 5s ./bench/
//
// Environment:
//
//	BENCH_CLIENTS           concurrent clients (default 8); pgbench uses -c and -j of the same
//	BENCH_POOL_CONNS        the API's pgx pool size (pool_max_conns); default is what
//	                        database.Open gives a deployment: max(4, GOMAXPROCS)
//	BENCH_PGBENCH_SECONDS   pgbench -T (default 10)
//	BENCH_PGBENCH_PROTOCOL  simple-update's pgbench -M: simple (default), extended or prepared
//
// Every benchmark reports throughput, p50/p99 latency per call, CPU time per call (this process,
// the database cluster, pgbench) and other-cores: the CPU, in cores, that everything else on the
// machine used meanwhile (the machine may be shared; a load average would count the benchmark's
// own threads). ns/op is wall time divided by calls, the inverse of throughput, not the latency
// of one call. The API's clients run in this process, so app-cpu-us/op includes their share.
package bench_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1/iamv1connect"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/pgcluster"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// clients is the number of concurrent callers, BENCH_CLIENTS or 8.
func clients(b *testing.B) int {
	b.Helper()
	return envInt(b, "BENCH_CLIENTS", 8)
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// env is the API as servertest.New runs it (server.New over database.Open on a fresh migrated
// database, served by httptest with HTTP/1.1 and h2c), with the pool size as a knob.
type env struct {
	url      string // API base URL
	pool     *pgxpool.Pool
	adminKey string
}

func newEnv(b *testing.B) *env {
	b.Helper()
	ctx := context.Background()
	u := dbtest.URL(b)
	if n := os.Getenv("BENCH_POOL_CONNS"); n != "" {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "pool_max_conns=" + n
	}
	pool, err := database.Open(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	api, err := server.New(server.Options{Pool: pool, Secret: servertest.Secret})
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(api)
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	b.Cleanup(ts.Close)
	key, err := auth.MintAdminKey(ctx, pool, "admin")
	if err != nil {
		b.Fatal(err)
	}
	return &env{url: ts.URL + server.DefaultBasePath, pool: pool, adminKey: key.String()}
}

// client is one caller: its own transport, hence its own keep-alive connection, as separate
// client processes would have. (A shared http.Transport keeps only two idle connections per
// host, so eight callers on one would keep opening new TCP connections.)
func (e *env) client(b *testing.B, key string) iamv1connect.IamServiceClient {
	b.Helper()
	return iamv1connect.NewIamServiceClient(e.httpClient(b, key), e.url)
}

type headers struct {
	key  string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Better-Compute", "1")
	r.Header.Set("Authorization", "Bearer "+h.key)
	return h.next.RoundTrip(r)
}

// run makes b.N calls from c workers, each worker w calling call(w, i) for the next free i, and
// reports throughput (as unit), the p50 and p99 latency, and the CPU time per call spent in this
// process (the API server and its in-process clients) and in the database cluster. Warm-up and
// set-up happen before.
func run(b *testing.B, e *env, c int, unit string, call func(w, i int) error) {
	b.Helper()
	lat := make([]time.Duration, b.N) // one slot per call, written without locks
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	cpu := startCPU(b, e.pool)
	b.ResetTimer()
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= b.N || firstErr.Load() != nil {
					return
				}
				t0 := time.Now()
				err := call(w, i)
				lat[i] = time.Since(t0)
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	app, db, machine := cpu.stop()
	if p := firstErr.Load(); p != nil {
		b.Fatalf("call failed: %v", *p)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), unit)
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
	b.ReportMetric(us(app)/float64(b.N), "app-cpu-us/op")
	if db >= 0 {
		b.ReportMetric(us(db)/float64(b.N), "db-cpu-us/op")
		b.ReportMetric(otherCores(machine, app+db, elapsed), "other-cores")
	}
}

// percentile picks the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// CPU accounting. Wall-clock rates on a shared 2-core machine move with whatever else runs;
// CPU time per call does not, so every benchmark also reports it: for this process from
// getrusage, and for the whole PostgreSQL cluster (postmaster, its reaped children and its live
// ones: backends, autovacuum, walwriter, checkpointer) from /proc. The database part needs the
// cluster on this machine; with BETTER_COMPUTE_TEST_DATABASE_URL pointing elsewhere it is
// skipped. /proc times are in clock ticks of 10ms (USER_HZ 100).

type cpuMeter struct {
	postmaster        int // 0: unknown
	self, db, machine time.Duration
	start             time.Time
}

func startCPU(b *testing.B, pool *pgxpool.Pool) *cpuMeter {
	b.Helper()
	m := &cpuMeter{}
	var backend int
	if err := pool.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		b.Fatalf("pg_backend_pid: %v", err)
	}
	// Only the private cluster runs here; an external server's pids mean nothing in our /proc.
	if os.Getenv("BETTER_COMPUTE_TEST_DATABASE_URL") == "" && isPostgres(backend) {
		if st, err := readStat(backend); err == nil && isPostgres(st.ppid) {
			m.postmaster = st.ppid
			if m.db, err = clusterCPU(m.postmaster); err != nil {
				m.postmaster = 0
			}
		}
	}
	m.self = selfCPU()
	m.machine = machineCPU()
	m.start = time.Now()
	return m
}

// stop returns the CPU used since start by this process and by the cluster (-1 when unknown),
// and by the whole machine, in cores (CPU time over wall time).
func (m *cpuMeter) stop() (self, db time.Duration, machineCores float64) {
	self = selfCPU() - m.self
	db = -1
	if m.postmaster != 0 {
		if d, err := clusterCPU(m.postmaster); err == nil {
			db = d - m.db
		}
	}
	return self, db, float64(machineCPU()-m.machine) / float64(time.Since(m.start))
}

// otherCores is the CPU, in cores, that processes other than the measured ones used during the
// measurement: other work on the shared machine, the noise next to every number.
func otherCores(machine float64, measured time.Duration, wall time.Duration) float64 {
	return max(machine-float64(measured)/float64(wall), 0)
}

// machineCPU is the busy time of all CPUs so far, from /proc/stat.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line)) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for _, k := range []int{1, 2, 3, 6, 7, 8} {
		if k < len(f) {
			n, _ := strconv.ParseInt(f[k], 10, 64)
			busy += n
		}
	}
	return time.Duration(busy) * tick
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func isPostgres(pid int) bool {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && bytes.HasPrefix(comm, []byte("postgres"))
}

type procStat struct {
	ppid           int
	self, children time.Duration // utime+stime, cutime+cstime
}

const tick = 10 * time.Millisecond // USER_HZ

func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	n := make([]int64, 15)
	for _, k := range []int{1, 11, 12, 13, 14} {
		if n[k], err = strconv.ParseInt(f[k], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	return procStat{ppid: int(n[1]), self: time.Duration(n[11]+n[12]) * tick, children: time.Duration(n[13]+n[14]) * tick}, nil
}

// clusterCPU is the CPU the cluster has used so far: the postmaster's own and its reaped
// children's, plus that of its live children.
func clusterCPU(postmaster int) (time.Duration, error) {
	st, err := readStat(postmaster)
	if err != nil {
		return 0, err
	}
	total := st.self + st.children
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if c, err := readStat(pid); err == nil && c.ppid == postmaster {
			total += c.self
		}
	}
	return total, nil
}

// warm makes one call per worker, concurrently, so connections (HTTP and the pool's) are open and
// statements prepared before the clock starts.
func warm(b *testing.B, c int, call func(w int) error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make([]error, c)
	for w := range c {
		wg.Go(func() { errs[w] = call(w) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatalf("warm-up: %v", err)
		}
	}
}

// BenchmarkIAMRead: authenticated reads. Each call authenticates its API key (one query) and
// then reads: GetPrincipal one more query, WhoAmI two.
func BenchmarkIAMRead(b *testing.B) {
	c := clients(b)
	b.Run(fmt.Sprintf("GetPrincipal/clients=%d", c), func(b *testing.B) {
		e := newEnv(b)
		cs := make([]iamv1connect.IamServiceClient, c)
		for w := range cs {
			cs[w] = e.client(b, e.adminKey)
		}
		me, err := cs[0].WhoAmI(context.Background(), &iamv1.WhoAmIRequest{})
		if err != nil {
			b.Fatal(err)
		}
		req := &iamv1.GetPrincipalRequest{Id: me.GetPrincipal().GetId()}
		get := func(w int) error {
			_, err := cs[w].GetPrincipal(context.Background(), req)
			return err
		}
		warm(b, c, get)
		run(b, e, c, "calls/s", func(w, _ int) error { return get(w) })
	})
	b.Run(fmt.Sprintf("WhoAmI/clients=%d", c), func(b *testing.B) {
		e := newEnv(b)
		cs := make([]iamv1connect.IamServiceClient, c)
		for w := range cs {
			cs[w] = e.client(b, e.adminKey)
		}
		who := func(w int) error {
			_, err := cs[w].WhoAmI(context.Background(), &iamv1.WhoAmIRequest{})
			return err
		}
		warm(b, c, who)
		run(b, e, c, "calls/s", func(w, _ int) error { return who(w) })
	})
}

// BenchmarkAdmissionWrite: mutations through admission.Do. CreateTenant inserts a tenant, its
// owner principal, role binding and API key, the audit row and one outbox event in one
// transaction; with an Idempotency-Key it also claims the key and stores the sealed response.
// CreatePrincipal is the smallest admission write: one insert and the audit row. LeaseCreate is
// leases/create (lease_bench_test.go), set against BenchmarkPgbenchCreateLeaseSQL.
func BenchmarkAdmissionWrite(b *testing.B) {
	c := clients(b)
	b.Run(fmt.Sprintf("CreateTenant/clients=%d", c), func(b *testing.B) {
		benchCreateTenant(b, c, false)
	})
	b.Run(fmt.Sprintf("CreateTenant+IdempotencyKey/clients=%d", c), func(b *testing.B) {
		benchCreateTenant(b, c, true)
	})
	b.Run(fmt.Sprintf("LeaseCreate/clients=%d", c), func(b *testing.B) {
		benchCreateLease(b, c)
	})
	b.Run(fmt.Sprintf("CreatePrincipal/clients=%d", c), func(b *testing.B) {
		e := newEnv(b)
		cs := make([]iamv1connect.IamServiceClient, c)
		for w := range cs {
			cs[w] = e.client(b, e.adminKey)
		}
		create := func(w int, name string) error {
			_, err := cs[w].CreatePrincipal(context.Background(), &iamv1.CreatePrincipalRequest{
				Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: name,
			})
			return err
		}
		warm(b, c, func(w int) error { return create(w, "warm-"+strconv.Itoa(w)) })
		run(b, e, c, "writes/s", func(w, i int) error { return create(w, "sa-"+strconv.Itoa(i)) })
	})
}

func benchCreateTenant(b *testing.B, c int, idempotent bool) {
	b.Helper()
	e := newEnv(b)
	cs := make([]iamv1connect.IamServiceClient, c)
	for w := range cs {
		cs[w] = e.client(b, e.adminKey)
	}
	create := func(w int, name string) error {
		ctx := context.Background()
		if idempotent {
			var ci connect.CallInfo
			ctx, ci = connect.NewClientContext(ctx)
			ci.RequestHeader().Set("Idempotency-Key", "k-"+name)
		}
		_, err := cs[w].CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: name, DisplayName: "Bench " + name})
		return err
	}
	warm(b, c, func(w int) error { return create(w, "warm-"+strconv.Itoa(w)) })
	run(b, e, c, "writes/s", func(w, i int) error { return create(w, "t-"+strconv.Itoa(i)) })
}

// BenchmarkPgbenchSimpleUpdate runs pgbench's built-in simple-update (BEGIN; UPDATE
// pgbench_accounts; SELECT; INSERT INTO pgbench_history; END: five round trips) with the same
// number of clients, against a fresh database on the same private cluster the API benchmarks
// use. pgbench runs once per process, for BENCH_PGBENCH_SECONDS; later rounds of the benchmark
// report the same result.
func BenchmarkPgbenchSimpleUpdate(b *testing.B) {
	c := clients(b)
	protocol := os.Getenv("BENCH_PGBENCH_PROTOCOL")
	if protocol == "" {
		protocol = "simple"
	}
	b.Run(fmt.Sprintf("clients=%d", c), func(b *testing.B) {
		pgbenchBench(b, "simple-update", func() (pgbenchResult, error) {
			return runPgbench(b, c, func(prog, u string) ([]string, error) {
				if out, err := exec.Command(prog, "-i", "-s", "1", "-q", u).CombinedOutput(); err != nil {
					return nil, fmt.Errorf("pgbench -i: %w\n%s", err, out)
				}
				return []string{"-b", "simple-update", "-M", protocol}, nil
			})
		})
	})
}

// BenchmarkPgbenchCreateTenantSQL replays, from pgbench, the SQL that one CreateTenant call
// sends (without an Idempotency-Key): the API key lookup, then BEGIN, the tenant, principal,
// role binding and API key inserts, the audit row, the outbox row and COMMIT, as prepared
// statements like pgx's. It is the database's own ceiling for this write, with no Go, HTTP or
// protobuf in the way. "pipelined" sends the transaction as one pipeline (pgbench
// \startpipeline), as a pgx.Batch would: two round trips instead of nine.
func BenchmarkPgbenchCreateTenantSQL(b *testing.B) {
	pgbenchReplay(b, "create-tenant", createTenantScript)
}

// pgbenchReplay runs a replay of an API call's SQL twice, each statement in a round trip of its
// own ("round-trips") and the transaction as one pipeline ("pipelined"), with script writing
// the pgbench script for the database at u and returning pgbench's arguments.
func pgbenchReplay(b *testing.B, name string, script func(b *testing.B, u string, pipelined bool) ([]string, error)) {
	b.Helper()
	c := clients(b)
	for _, pipelined := range []bool{false, true} {
		variant := "round-trips"
		if pipelined {
			variant = "pipelined"
		}
		b.Run(fmt.Sprintf("%s/clients=%d", variant, c), func(b *testing.B) {
			pgbenchBench(b, name+"-"+variant, func() (pgbenchResult, error) {
				return runPgbench(b, c, func(_, u string) ([]string, error) {
					return script(b, u, pipelined)
				})
			})
		})
	}
}

// pipelineMarks are the pgbench meta-commands around a transaction sent as one pipeline, or
// nothing.
func pipelineMarks(pipelined bool) (start, end string) {
	if pipelined {
		return "\\startpipeline\n", "\\endpipeline\n"
	}
	return "", ""
}

// createTenantScript mints an admin key in the database at u and writes the pgbench script.
func createTenantScript(b *testing.B, u string, pipelined bool) ([]string, error) {
	b.Helper()
	ctx := context.Background()
	pool, err := database.Open(ctx, u)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	key, err := auth.MintAdminKey(ctx, pool, "admin")
	if err != nil {
		return nil, err
	}
	var root, admin string
	if err := pool.QueryRow(ctx, "SELECT tenant_id::text, principal_id::text FROM api_keys WHERE id = $1", key.ID).Scan(&root, &admin); err != nil {
		return nil, err
	}
	start, end := pipelineMarks(pipelined)
	// Ids derive from a random number, so statements need no earlier results; md5 makes UUIDs.
	script := `\set n random(1, 1000000000000000)
SELECT k.id, k.secret_hash, k.expires_at, k.last_used_at, k.tenant_id, k.principal_id, p.kind, p.name AS principal_name, t.is_root, COALESCE(array_agg(rb.role ORDER BY rb.role) FILTER (WHERE rb.role IS NOT NULL), '{}')::text[] AS roles FROM api_keys k JOIN principals p ON p.id = k.principal_id JOIN tenants t ON t.id = k.tenant_id LEFT JOIN role_bindings rb ON rb.principal_id = k.principal_id WHERE k.id = :key GROUP BY k.id, p.id, t.id;
` + start + `BEGIN;
INSERT INTO tenants (id, parent_id, name, display_name) VALUES (md5('t' || :n)::uuid, :root, 'b' || :n, 'Bench') RETURNING *;
INSERT INTO principals (id, tenant_id, kind, name, email) VALUES (md5('p' || :n)::uuid, md5('t' || :n)::uuid, 'service_account', 'owner', '') RETURNING *;
INSERT INTO role_bindings (id, tenant_id, principal_id, role) VALUES (md5('r' || :n)::uuid, md5('t' || :n)::uuid, md5('p' || :n)::uuid, 'owner') RETURNING *;
INSERT INTO api_keys (id, tenant_id, principal_id, name, secret_hash) VALUES (left(md5('k' || :n), 16), md5('t' || :n)::uuid, md5('p' || :n)::uuid, 'owner', decode(md5('s' || :n), 'hex')) RETURNING *;
INSERT INTO audit_events (tenant_id, principal_id, method, target, outcome, request_id) VALUES (:root, :admin, 'iam/createTenant', 'tenant/' || md5('t' || :n), 'ok', 'req-' || :n);
INSERT INTO outbox (tenant_id, type, subject, payload) VALUES (:root, 'tenant.created', 'tenant/' || md5('t' || :n), jsonb_build_object('id', md5('t' || :n)::uuid, 'name', 'b' || :n));
COMMIT;
` + end
	file := filepath.Join(b.TempDir(), "create-tenant.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		return nil, err
	}
	return []string{"-f", file, "-M", "prepared", "-D", "key=" + key.ID, "-D", "root=" + root, "-D", "admin=" + admin}, nil
}

// pgbenchBench runs a pgbench measurement once per process and reports it.
func pgbenchBench(b *testing.B, name string, measure func() (pgbenchResult, error)) {
	b.Helper()
	r := func() pgbenchOutcome {
		pgbenchMu.Lock()
		defer pgbenchMu.Unlock() // measure may end the goroutine with b.Fatal
		r, ok := pgbenchResults[name]
		if !ok {
			r.pgbenchResult, r.err = measure()
			pgbenchResults[name] = r
		}
		return r
	}()
	if r.err != nil {
		b.Fatal(r.err)
	}
	b.ReportMetric(1e9/r.tps, "ns/op")
	b.ReportMetric(r.tps, "tps")
	b.ReportMetric(r.p50, "p50-ms")
	b.ReportMetric(r.p99, "p99-ms")
	b.ReportMetric(r.clientCPU, "client-cpu-us/op")
	if r.dbCPU >= 0 {
		b.ReportMetric(r.dbCPU, "db-cpu-us/op")
		b.ReportMetric(r.otherCores, "other-cores")
	}
}

type pgbenchResult struct{ tps, p50, p99, clientCPU, dbCPU, otherCores float64 }

var (
	pgbenchMu      sync.Mutex
	pgbenchResults = map[string]pgbenchOutcome{}
)

type pgbenchOutcome struct {
	pgbenchResult
	err error
}

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// runPgbench runs pgbench with c clients and threads for BENCH_PGBENCH_SECONDS against a fresh
// database, after prepare has set the database up and returned the workload's arguments.
func runPgbench(b *testing.B, c int, prepare func(prog, url string) ([]string, error)) (pgbenchResult, error) {
	b.Helper()
	var res pgbenchResult
	bins, err := pgcluster.FindBinaries("")
	if err != nil {
		return res, fmt.Errorf("pgbench: %w", err)
	}
	prog := filepath.Join(bins.Dir, "pgbench")
	if _, err := os.Stat(prog); err != nil {
		// The fetched server builds have no pgbench; any pgbench of 14 or later (pipelines)
		// speaks to the server.
		p, perr := exec.LookPath("pgbench")
		if perr != nil {
			return res, fmt.Errorf("pgbench not found beside the server binaries (%s) nor on PATH; install it (Debian: postgresql-client-%s)", prog, filepath.Base(filepath.Dir(bins.Dir)))
		}
		prog = p
	}
	seconds := envInt(b, "BENCH_PGBENCH_SECONDS", 10)
	u := dbtest.URL(b)
	workload, err := prepare(prog, u)
	if err != nil {
		return res, err
	}
	pool, err := database.Open(context.Background(), u)
	if err != nil {
		return res, err
	}
	cpu := startCPU(b, pool)
	pool.Close()
	logs := b.TempDir()
	args := append(workload, "-c", strconv.Itoa(c), "-j", strconv.Itoa(c),
		"-T", strconv.Itoa(seconds), "-n", "-l", "--log-prefix", filepath.Join(logs, "tx"), u)
	shown := strings.Join(args[:len(args)-1], " ") + " <url>"
	cmd := exec.Command(prog, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return res, fmt.Errorf("pgbench %s: %w\n%s", shown, err, out)
	}
	_, db, machine := cpu.stop()
	wall := time.Since(cpu.start)
	client := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	b.Logf("pgbench %s\n%s", shown, out)
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("no \"tps = N\" in pgbench's output:\n%s", out)
	}
	if res.tps, err = strconv.ParseFloat(string(m[1]), 64); err != nil {
		return res, fmt.Errorf("pgbench tps %q: %w", m[1], err)
	}
	lat, err := pgbenchLatencies(logs)
	if err != nil {
		return res, err
	}
	slices.Sort(lat)
	res.p50, res.p99 = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99))
	res.clientCPU = us(client) / float64(len(lat))
	res.dbCPU = -1
	if db >= 0 {
		res.dbCPU = us(db) / float64(len(lat))
		res.otherCores = otherCores(machine, client+db, wall)
	}
	return res, nil
}

// pgbenchLatencies reads the per-transaction logs pgbench -l wrote (one file per thread), whose
// third field is the transaction's latency in microseconds.
func pgbenchLatencies(dir string) ([]time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(dir, "tx.*"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no pgbench transaction logs in %s (%w)", dir, err)
	}
	var lat []time.Duration
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 3 {
				continue
			}
			us, err := strconv.ParseInt(fields[2], 10, 64)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %q: %w", name, sc.Text(), err)
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return lat, nil
}
