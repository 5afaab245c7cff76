package provision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/module"
)

// The checks' bounds: how many classes they ask, how long each provider may take, and how long
// a machine may stay in a passing step before it is stuck.
const (
	checkClasses  = 100
	checkProvider = 15 * time.Second
	stuckAfter    = 30 * time.Minute
	stuckShown    = 5
)

var _ module.Checker = (*Module)(nil)

// Checks are the module's doctor checks: providers (each class's provider answers with its
// credentials), orphans (provider resources of this deployment that no machine names) and
// stuck (machines in a step for more than 30 minutes).
func (m *Module) Checks(d module.CheckDeps) []module.Check {
	c := checker{pool: d.Pool, secret: d.Secret, providers: m.providers, orphans: m.cfg.Orphans.withDefaults(), egress: egressOf(m.cfg)}
	return []module.Check{
		{Name: "providers", Run: c.providersCheck},
		{Name: "orphans", Run: c.orphansCheck},
		{Name: "stuck", Run: c.stuckCheck},
	}
}

type checker struct {
	pool      *pgxpool.Pool
	secret    string
	providers Providers
	orphans   OrphansConfig
	egress    provision.Egress
}

// classProviders opens every class's provider; a class whose provider cannot be opened is a
// problem of its own, returned as text.
func (c checker) classProviders(ctx context.Context) ([]provisiondb.ProvisionClass, []provision.Provider, []string, error) {
	if c.secret == "" {
		return nil, nil, nil, fmt.Errorf("no deployment secret: run doctor with the deployment's configuration")
	}
	seal, err := newSealers(c.secret)
	if err != nil {
		return nil, nil, nil, err
	}
	classes, err := provisiondb.New(c.pool).ListAllClasses(ctx, checkClasses)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list classes: %w", err)
	}
	o := opener{providers: c.providers, seal: seal, egress: c.egress}
	var ps []provision.Provider
	var problems []string
	var opened []provisiondb.ProvisionClass
	for _, cl := range classes {
		p, err := o.open(cl)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		opened, ps = append(opened, cl), append(ps, p)
	}
	return opened, ps, problems, nil
}

// providersCheck lists each class's machines at its provider: what proves the credentials and
// the endpoint work.
func (c checker) providersCheck(ctx context.Context) doctor.Finding {
	classes, ps, problems, err := c.classProviders(ctx)
	if err != nil {
		return doctor.Finding{Severity: doctor.Warning, Cause: "cannot check the providers: " + err.Error()}
	}
	for i, p := range ps {
		lctx, cancel := context.WithTimeout(ctx, checkProvider)
		_, err := p.List(lctx)
		cancel()
		if err != nil {
			problems = append(problems, fmt.Sprintf("class %s (%s): %v", classes[i].Name, classes[i].Provider, err))
		}
	}
	if len(problems) > 0 {
		return doctor.Finding{Severity: doctor.Error, Cause: strings.Join(problems, "; "),
			Fix: "check each class's endpoint, credentials and parameters (machineClasses/get), and that this host reaches the provider"}
	}
	return doctor.Finding{Severity: doctor.OK, Cause: fmt.Sprintf("%d classes' providers answered", len(ps))}
}

// orphansCheck finds what the providers hold for this deployment that no machine names (as the
// orphan sweep does, findOrphans): a resource left by a crash before its id was recorded, or
// made by hand with the tags. It says whether the sweep removes them.
func (c checker) orphansCheck(ctx context.Context) doctor.Finding {
	classes, ps, _, err := c.classProviders(ctx)
	if err != nil {
		return doctor.Finding{Severity: doctor.Warning, Cause: "cannot check for orphans: " + err.Error()}
	}
	b, err := pki.Load(ctx, c.pool, c.secret)
	if err != nil {
		return doctor.Finding{Severity: doctor.Warning, Cause: "cannot check for orphans: load the PKI: " + err.Error()}
	}
	q := provisiondb.New(c.pool)
	var orphans []string
	for i, p := range ps {
		found, err := findOrphans(ctx, q, p, b.TrustDomain())
		if errors.Is(err, errProviderList) {
			continue // the providers check reports it
		}
		if err != nil {
			return doctor.Finding{Severity: doctor.Warning, Cause: "cannot check for orphans: " + err.Error()}
		}
		for _, o := range found {
			orphans = append(orphans, fmt.Sprintf("%s in class %s (machine tag %q)", o.ProviderID, classes[i].Name, o.tag))
		}
	}
	removal := "orphan removal is off (modules.provision.orphans.remove)"
	fix := "delete them at the provider if nothing else uses them, or set modules.provision.orphans.remove so that the orphan sweep deletes them"
	if c.orphans.Remove {
		removal = fmt.Sprintf("the orphan sweep removes orphans seen for %s", c.orphans.MinAge)
		fix = fmt.Sprintf("nothing to do: the sweep deletes each once it has seen it for %s; to keep one, remove its %s tag at the provider", c.orphans.MinAge, provision.TagDeployment)
	}
	if len(orphans) > 0 {
		return doctor.Finding{Severity: doctor.Warning, Cause: fmt.Sprintf("%d provider resources of this deployment have no machine: %s; %s", len(orphans), strings.Join(orphans, ", "), removal),
			Fix: fix}
	}
	return doctor.Finding{Severity: doctor.OK, Cause: "every provider resource of this deployment has its machine; " + removal}
}

// stuckCheck lists machines that stayed in a step that should pass for more than stuckAfter.
func (c checker) stuckCheck(ctx context.Context) doctor.Finding {
	rows, err := provisiondb.New(c.pool).StuckMachines(ctx, provisiondb.StuckMachinesParams{ThresholdMs: stuckAfter.Milliseconds(), Lim: stuckShown + 1})
	if err != nil {
		return doctor.Finding{Severity: doctor.Warning, Cause: "cannot check for stuck machines: " + err.Error()}
	}
	if len(rows) == 0 {
		return doctor.Finding{Severity: doctor.OK, Cause: "no machine has been in one step for " + stuckAfter.String()}
	}
	var shown []string
	for i, r := range rows {
		if i == stuckShown {
			shown = append(shown, "…")
			break
		}
		shown = append(shown, fmt.Sprintf("%s (%s) %s since %s", r.Name, r.ID, r.State, r.StateChangedAt.UTC().Format(time.RFC3339)))
	}
	return doctor.Finding{Severity: doctor.Warning, Cause: "machines stuck in a step: " + strings.Join(shown, "; "),
		Fix: "read each machine's steps and reason (machines/get); check its provider (the providers check) and that the controllers role runs"}
}
