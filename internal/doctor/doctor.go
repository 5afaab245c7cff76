// Package doctor diagnoses a deployment: whether it is set up right (schema, clock, method
// registry, PKI, gateways reachable) and, once migrated, whether it is running well (overdue
// reconcile work, a stalled command sweeper, silent nodes, old daemons, expiring certificates,
// gateway headroom, pools granted beyond what they hold, quarantined GPUs and drivers that do not
// answer, auth methods whose identity provider does not answer; the sessions by transport). Each
// finding says how bad it is, why, and what to do.
package doctor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/better-compute/better-compute/module"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/jobrun"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/registry"
)

// Severity orders findings (module.Severity: a module's checks report the same findings).
type Severity = module.Severity

// Severities, from fine to broken.
const (
	OK      = module.OK
	Warning = module.Warning
	Error   = module.Error
)

// Finding is the result of one check.
type Finding = module.Finding

// Options are what the checks need.
type Options struct {
	Pool *pgxpool.Pool
	// Secret opens the PKI bundle; empty skips the checks that need it.
	Secret string
	// Now is the local clock; time.Now when nil.
	Now func() time.Time
	// GatewaySessionLimit is the sessions one gateway is sized for, for headroom warnings.
	GatewaySessionLimit int64
	// SilentAfter is how long a connected node may go unheard before it is reported (2 minutes
	// by default).
	SilentAfter time.Duration
	// LagAfter is how old an undelivered event or an unaggregated usage record may be before it
	// is reported (a minute by default).
	LagAfter time.Duration
	// ModuleFiles are the enabled modules' API files, checked with the core's in the method
	// registry.
	ModuleFiles []protoreflect.FileDescriptor
	// AllowPrivateIssuers lets the auth methods' providers live on loopback and private
	// addresses, as the API's auth.allowPrivateIssuers does (else such a provider is reported).
	AllowPrivateIssuers bool
	// AuthTimeout bounds checking one auth method's provider (5 seconds by default).
	AuthTimeout time.Duration
	// Checks are the enabled modules' checks, run once the schema is current; each finding's
	// Check is "module.<module>.<check>".
	Checks []Check
}

// Check is a module's check (package module): Run says how it stands, and a check that cannot
// run says so in its finding.
type Check struct {
	// Name is "module.<module>.<check>".
	Name string
	Run  func(ctx context.Context) Finding
}

// Limits the running checks warn at.
const (
	maxClockSkew       = 2 * time.Second
	maxOverdue         = time.Minute
	sweeperStall       = 30 * time.Second
	silentAfter        = 2 * time.Minute
	certWarning        = 6 * time.Hour
	defaultSessionsCap = 10000
)

// Run performs every check. A check that cannot run is itself a finding, so Run returns an
// error only when the database cannot be reached at all.
func Run(ctx context.Context, opts Options) ([]Finding, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.GatewaySessionLimit == 0 {
		opts.GatewaySessionLimit = defaultSessionsCap
	}
	if opts.SilentAfter == 0 {
		opts.SilentAfter = silentAfter
	}
	if opts.LagAfter == 0 {
		opts.LagAfter = maxOverdue
	}
	q := db.New(opts.Pool)
	dbNow, err := q.DatabaseNow(ctx)
	if err != nil {
		return nil, fmt.Errorf("doctor: query the database: %w", err)
	}
	var out []Finding
	add := func(f Finding) { out = append(out, f) }

	add(clock(dbNow, opts.Now()))
	add(methodRegistry(opts.ModuleFiles))
	schema, migrated := schemaCurrent(ctx, opts.Pool)
	add(schema)
	if !migrated {
		return out, nil
	}
	out = append(out, pkiChecks(ctx, opts)...)
	out = append(out, running(ctx, opts)...)
	out = append(out, authMethods(ctx, opts)...)
	for _, c := range opts.Checks {
		f := c.Run(ctx)
		f.Check = c.Name
		add(f)
	}
	return out, nil
}

func clock(dbNow, local time.Time) Finding {
	skew := local.Sub(dbNow)
	if skew < 0 {
		skew = -skew
	}
	f := Finding{Check: "clock", Severity: OK, Cause: fmt.Sprintf("skew to the database %s", skew.Round(time.Millisecond))}
	if skew > maxClockSkew {
		f.Severity, f.Fix = Warning, "run NTP (chrony or systemd-timesyncd) on this host and the database host; leases and certificates depend on agreeing clocks"
	}
	return f
}

func methodRegistry(modules []protoreflect.FileDescriptor) Finding {
	reg, err := registry.FromGlobal(modules...)
	if err != nil {
		return Finding{Check: "method registry", Severity: Error, Cause: err.Error(), Fix: "fix the (bettercompute.api.v1.method) options in proto/ and regenerate"}
	}
	return Finding{Check: "method registry", Severity: OK, Cause: fmt.Sprintf("%d methods, each public or with a permission, no duplicate routes", len(reg.Methods()))}
}

func schemaCurrent(ctx context.Context, pool *pgxpool.Pool) (Finding, bool) {
	m, err := migrate.New(pool)
	if err != nil {
		return Finding{Check: "schema", Severity: Error, Cause: err.Error()}, false
	}
	states, err := m.Status(ctx)
	if err != nil {
		return Finding{Check: "schema", Severity: Error, Cause: err.Error(), Fix: "run a release that knows the database's migrations"}, false
	}
	pending := 0
	for _, s := range states {
		if !s.Applied {
			pending++
		}
	}
	switch {
	case pending == len(states):
		return Finding{Check: "schema", Severity: Error, Cause: "the database is not migrated", Fix: "run `better-compute migrate`"}, false
	case pending > 0:
		return Finding{Check: "schema", Severity: Error, Cause: fmt.Sprintf("%d of %d migrations pending", pending, len(states)), Fix: "run `better-compute migrate`"}, true
	}
	return Finding{Check: "schema", Severity: OK, Cause: fmt.Sprintf("all %d migrations applied", len(states))}, true
}

func pkiChecks(ctx context.Context, opts Options) []Finding {
	status, err := pki.Status(ctx, opts.Pool)
	if errors.Is(err, pki.ErrNotInitialized) {
		return []Finding{{Check: "pki", Severity: Error, Cause: "the machine PKI is not initialised: nodes cannot join",
			Fix: "run `better-compute pki init --trust-domain <domain>`"}}
	}
	if err != nil {
		return []Finding{{Check: "pki", Severity: Error, Cause: err.Error()}}
	}
	f := Finding{Check: "pki", Severity: OK, Cause: fmt.Sprintf("trust domain %s, %d authorities", status.TrustDomain, len(status.Authorities))}
	if len(status.Warnings) > 0 {
		f.Severity, f.Cause, f.Fix = Warning, status.Warnings[0], "rotate with `better-compute pki rotate-node-ca` (node CA) or plan a root rotation"
	}
	out := []Finding{f}
	if opts.Secret == "" {
		return out
	}
	bundle, err := pki.Load(ctx, opts.Pool, opts.Secret)
	if err != nil {
		return append(out, Finding{Check: "gateway authenticates daemons", Severity: Error, Cause: err.Error(),
			Fix: "give every process the deployment secret the PKI was initialised with"})
	}
	out = append(out, Finding{Check: "gateway authenticates daemons", Severity: OK, Cause: "the PKI bundle opens with this secret and has a node CA"})
	return append(out, reachGateways(ctx, opts.Pool, bundle))
}

// reachGateways makes an mTLS handshake with every live gateway's control API, as the API's
// notifier would.
func reachGateways(ctx context.Context, pool *pgxpool.Pool, bundle *pki.Bundle) Finding {
	gws, err := db.New(pool).LiveGateways(ctx)
	if err != nil {
		return Finding{Check: "api reaches gateways", Severity: Error, Cause: err.Error()}
	}
	if len(gws) == 0 {
		return Finding{Check: "api reaches gateways", Severity: Warning, Cause: "no gateway is running", Fix: "start a process with the gateway role (gateway.listen in the configuration)"}
	}
	certPEM, keyPEM, err := bundle.IssueInternal("doctor", nil, nil)
	if err != nil {
		return Finding{Check: "api reaches gateways", Severity: Error, Cause: err.Error()}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return Finding{Check: "api reaches gateways", Severity: Error, Cause: err.Error()}
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: bundle.InternalCAPool(),
	}}}
	defer client.CloseIdleConnections()
	var unreachable []string
	for _, g := range gws {
		if g.ControlUrl == "" {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.ControlUrl+"/", nil)
		res, err := client.Do(req)
		if err != nil {
			unreachable = append(unreachable, fmt.Sprintf("%s (%v)", g.ID, err))
			continue
		}
		res.Body.Close()
	}
	if len(unreachable) > 0 {
		return Finding{Check: "api reaches gateways", Severity: Warning, Cause: fmt.Sprintf("%d of %d gateways' control APIs unreachable: %s", len(unreachable), len(gws), unreachable[0]),
			Fix: "open gateway.controlListen (default :8444) from API hosts; without it commands wait for the gateways' 1-second loop"}
	}
	return Finding{Check: "api reaches gateways", Severity: OK, Cause: fmt.Sprintf("%d gateways answer on their control API", len(gws))}
}

func running(ctx context.Context, opts Options) []Finding {
	q := db.New(opts.Pool)
	var out []Finding
	add := func(check string, err error, f Finding) {
		if err != nil {
			f = Finding{Severity: Error, Cause: err.Error()}
		}
		f.Check = check
		out = append(out, f)
	}

	stats, err := q.ReconcileQueueStats(ctx)
	f := Finding{Severity: OK, Cause: "no reconcile work overdue"}
	for _, s := range stats {
		if age := time.Duration(s.OldestDueSeconds * float64(time.Second)); age > maxOverdue {
			f = Finding{Severity: Warning, Cause: fmt.Sprintf("kind %s has %d due keys, the oldest due for %s", s.Kind, s.Due, age.Round(time.Second)),
				Fix: "run (more) processes with the controllers or scheduler role; check their logs for reconcile errors"}
			break
		}
	}
	add("reconcile backlog", err, f)

	runs, err := jobrun.List(ctx, opts.Pool)
	f = Finding{Severity: Warning, Cause: "the command sweeper has never run", Fix: "run a process with the controllers role"}
	for _, r := range runs {
		if r.Name == "command-sweeper" {
			if age := opts.Now().Sub(r.LastRunAt); age > sweeperStall {
				f.Cause = fmt.Sprintf("the command sweeper last ran %s ago", age.Round(time.Second))
			} else {
				f = Finding{Severity: OK, Cause: fmt.Sprintf("the command sweeper ran %s ago", age.Round(time.Second))}
			}
		}
	}
	add("command sweeper", err, f)

	gws, err := q.GatewaySessions(ctx)
	f = Finding{Severity: OK, Cause: fmt.Sprintf("%d gateways", len(gws))}
	for _, g := range gws {
		if g.Sessions > opts.GatewaySessionLimit*8/10 {
			f = Finding{Severity: Warning, Cause: fmt.Sprintf("gateway %s holds %d sessions, over 80%% of %d", g.ID, g.Sessions, opts.GatewaySessionLimit),
				Fix: "add gateway processes behind the L4 balancer"}
		}
	}
	add("gateway headroom", err, f)

	silent, err := q.SilentNodes(ctx, opts.SilentAfter.Milliseconds())
	f = Finding{Severity: OK, Cause: "every connected node is heard from"}
	if silent > 0 {
		f = Finding{Severity: Warning, Cause: fmt.Sprintf("%d connected nodes silent for over %s", silent, opts.SilentAfter), Fix: "check those hosts' network and bcd logs"}
	}
	add("silent nodes", err, f)
	add("session transports", nil, sessionTransports(ctx, q))

	add("outbox delivery", nil, outbox(ctx, q, opts))
	add("failing webhooks", nil, failingWebhooks(ctx, q))
	add("granted quotas", nil, overcommittedGrants(ctx, q))
	add("GPU health", nil, gpuHealth(ctx, q))
	add("remediations", nil, remediations(ctx, q))

	records, oldest, err := capacity.UsageBacklog(ctx, opts.Pool)
	f = Finding{Severity: OK, Cause: fmt.Sprintf("%d usage records waiting for aggregation", records)}
	if oldest > opts.LagAfter {
		f = Finding{Severity: Warning, Cause: fmt.Sprintf("%d usage records not aggregated, the oldest for %s", records, oldest.Round(time.Second)),
			Fix: "run a process with the controllers role (the usage job)"}
	}
	add("usage backlog", err, f)

	versions, err := q.DaemonVersions(ctx)
	f = Finding{Severity: OK, Cause: fmt.Sprintf("%d daemon versions in the fleet", len(versions))}
	if len(versions) > 1 {
		f = Finding{Severity: Warning, Cause: fmt.Sprintf("%d daemon versions in the fleet (oldest %s on %d nodes)", len(versions), versions[0].DaemonVersion, versions[0].Nodes),
			Fix: "upgrade the old daemons (NodeSpec daemon version)"}
	}
	add("daemon versions", err, f)

	expiring, err := q.ExpiringNodeCertificates(ctx, certWarning.Milliseconds())
	f = Finding{Severity: OK, Cause: "no node certificate expires soon"}
	if expiring > 0 {
		f = Finding{Severity: Warning, Cause: fmt.Sprintf("%d node certificates expire within %s", expiring, certWarning), Fix: "daemons renew at two thirds of their lifetime: check the disconnected ones"}
	}
	add("node certificates", err, f)
	return out
}

// outbox reports sinks nobody dispatches and sinks that fall behind.
func outbox(ctx context.Context, q *db.Queries, opts Options) Finding {
	idle, err := q.UndispatchedWebhooks(ctx)
	if err != nil {
		return Finding{Severity: Error, Cause: err.Error()}
	}
	if len(idle) > 0 {
		return Finding{Severity: Warning, Cause: fmt.Sprintf("no process delivers webhook %s (and %d more)", idle[0], len(idle)-1),
			Fix: "run a process with the sinks role"}
	}
	lags, err := q.OutboxLag(ctx, 10000)
	if err != nil {
		return Finding{Severity: Error, Cause: err.Error()}
	}
	for _, l := range lags {
		if age := time.Duration(l.OldestSeconds * float64(time.Second)); age > opts.LagAfter {
			return Finding{Severity: Warning, Cause: fmt.Sprintf("sink %s is %d events behind, the oldest from %s ago", l.Sink, l.Events, age.Round(time.Second)),
				Fix: "check the sink's endpoint (webhooks/list shows its last error) and the sinks role's logs"}
		}
	}
	return Finding{Severity: OK, Cause: fmt.Sprintf("%d sinks, none behind", len(lags))}
}

// failingWebhooks reports webhooks whose retries ran out: their events are parked, not
// delivered, until their tenant replays them.
func failingWebhooks(ctx context.Context, q *db.Queries) Finding {
	hooks, err := q.FailingWebhooks(ctx)
	if err != nil {
		return Finding{Severity: Error, Cause: err.Error()}
	}
	if len(hooks) == 0 {
		return Finding{Severity: OK, Cause: "no webhook is failing"}
	}
	h := hooks[0]
	since := "an unknown time"
	if h.FailingSince != nil {
		since = h.FailingSince.UTC().Format(time.RFC3339)
	}
	return Finding{Severity: Warning,
		Cause: fmt.Sprintf("%d webhooks failing; webhook %s of tenant %s since %s (%s), %d events parked",
			h.Total, h.ID, h.TenantID, since, h.Failure, h.Parked),
		Fix: "the tenant fixes its endpoint, then calls webhooks/replayDeadLetters (webhooks/listDeadLetters shows what is parked)"}
}

// overcommittedGrants reports pools whose active grants' nominal quotas add up to more of a
// resource than the pool's members hold. Grants may do that (pools/grant allows it), but then the
// quotas are promises the pool cannot keep at once: a grantee within its nominal quota may wait
// for capacity, since the placer preempts only borrowing leases for it.
func overcommittedGrants(ctx context.Context, q *db.Queries) Finding {
	over, err := q.OvercommittedGrants(ctx)
	if err != nil {
		return Finding{Severity: Error, Cause: err.Error()}
	}
	if len(over) == 0 {
		return Finding{Severity: OK, Cause: "every pool holds the nominal quotas granted of it"}
	}
	o := over[0]
	what := fmt.Sprintf("%s GPUs", o.Model)
	switch o.Resource {
	case "cpu":
		what = "CPUs"
	case "memory":
		what = "bytes of memory"
	}
	more := ""
	if o.Total > 1 {
		more = fmt.Sprintf(" (and %d more over-committed resources of pools)", o.Total-1)
	}
	return Finding{Severity: Warning,
		Cause: fmt.Sprintf("pool %s (%s) of tenant %s is over-committed: its active grants' nominal quotas add up to %d %s, its members hold %d%s",
			o.PoolID, o.PoolName, o.TenantID, o.Nominal, what, o.Held, more),
		Fix: "the pool's owner lowers grants' nominal quotas (pools/grant) or revokes some (pools/revokeGrant), or adds nodes to the pool; until then a grantee within its quota may wait for capacity"}
}

// gpuHealth reports quarantined GPUs and nodes (docs/gpus.md) and nodes whose driver does not
// answer the daemon's health probe: capacity the placer leaves aside until someone looks.
func gpuHealth(ctx context.Context, q *db.Queries) Finding {
	p, err := q.GPUHealthProblems(ctx)
	if err != nil {
		return Finding{Severity: Error, Cause: err.Error()}
	}
	if p.UnhealthyGpus == 0 && p.QuarantinedNodes == 0 && p.DriverNotAnswering == 0 {
		return Finding{Severity: OK, Cause: "no GPU or node is quarantined, and every driver answers"}
	}
	var causes, fixes []string
	if p.UnhealthyGpus > 0 || p.QuarantinedNodes > 0 {
		causes = append(causes, fmt.Sprintf("%d GPUs unhealthy (quarantined), %d nodes quarantined as a whole", p.UnhealthyGpus, p.QuarantinedNodes))
		fixes = append(fixes, "gpus/list with health HEALTH_STATE_UNHEALTHY says which and why; reset or replace them as docs/gpus.md says, then gpus/clear")
	}
	if p.DriverNotAnswering > 0 {
		causes = append(causes, fmt.Sprintf("the NVIDIA driver does not answer on %d nodes (%s the latest)", p.DriverNotAnswering, p.DriverExample))
		fixes = append(fixes, "run nvidia-smi on those hosts and read their kernel log (Xid errors); a reboot or driver reload usually brings it back")
	}
	return Finding{Severity: Warning, Cause: strings.Join(causes, "; "), Fix: strings.Join(fixes, "; ")}
}

// Thresholds of the remediations check.
const (
	// RemediationStuckAfter is how long a remediation's step may run before it counts as stuck:
	// longer than any step's command may run (a level-4 diagnostic, four hours).
	RemediationStuckAfter = 5 * time.Hour
	// RemediationWaitingAfter is how long a remediation may wait for its pools' budgets before it
	// is reported.
	RemediationWaitingAfter = time.Hour
)

// remediations reports remediations that need a person (docs/remediation.md): stuck steps,
// budgets used up for long, and hardware waiting in service.
func remediations(ctx context.Context, q *db.Queries) Finding {
	p, err := q.RemediationProblems(ctx, db.RemediationProblemsParams{
		StuckAfterS: int64(RemediationStuckAfter / time.Second), WaitingAfterS: int64(RemediationWaitingAfter / time.Second),
	})
	if err != nil {
		return Finding{Severity: Error, Cause: err.Error()}
	}
	if p.Stuck == 0 && p.Waiting == 0 && p.InService == 0 {
		return Finding{Severity: OK, Cause: "no remediation is stuck or waiting long, and no hardware waits in service"}
	}
	var causes, fixes []string
	if p.Stuck > 0 {
		causes = append(causes, fmt.Sprintf("%d remediations have had a step running for over %v", p.Stuck, RemediationStuckAfter))
		fixes = append(fixes, "remediations/list with state running shows the step; look at its node (is it online? did its command end?) or remediations/cancel it")
	}
	if p.Waiting > 0 {
		causes = append(causes, fmt.Sprintf("%d remediations have waited over %v for their pools' budgets", p.Waiting, RemediationWaitingAfter))
		fixes = append(fixes, "raise the pools' remediation max_nodes, or see why the running ones take long")
	}
	if p.InService > 0 {
		causes = append(causes, fmt.Sprintf("%d remediations ended in service: hardware to replace", p.InService))
		fixes = append(fixes, "replace the hardware (the remediation.service_required event carries the ticket), then remediations/returnFromService")
	}
	return Finding{Severity: Warning, Cause: strings.Join(causes, "; "), Fix: strings.Join(fixes, "; ")}
}

// Worst is the most severe finding's severity.
func Worst(fs []Finding) Severity {
	worst := OK
	for _, f := range fs {
		switch {
		case f.Severity == Error:
			return Error
		case f.Severity == Warning:
			worst = Warning
		}
	}
	return worst
}
