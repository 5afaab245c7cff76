package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// OrphansKind is the orphan sweep's reconcile kind; its keys are classes, "<tenant id>/<name>".
const OrphansKind = "provision.orphans"

// orphanDelete bounds each of the sweep's Deletes (its List is bounded as the doctor's is, by
// checkProvider).
const orphanDelete = time.Minute

// errProviderList marks findOrphans' errors that are the provider's List failing, which the
// doctor's providers check reports on its own.
var errProviderList = errors.New("list the provider's machines")

// orphan is a provider resource of this deployment that no machine names.
type orphan struct {
	provision.Machine
	// tag is its machine tag, as found.
	tag string
}

// machineID is the machine id the orphan's tag names, or the nil UUID.
func (o orphan) machineID() uuid.UUID {
	id, err := uuid.Parse(o.tag)
	if err != nil {
		return uuid.Nil
	}
	return id
}

// findOrphans lists the resources p holds for deployment (tagged with it, not gone) whose
// machine tag names no machine that is not gone: none at all, one that is gone, or something
// that is not a machine id. It is the one definition of an orphan, for the sweep and the doctor.
// A tag naming a live machine of another class or tenant makes the resource that machine's, not
// an orphan, since classes may share a provider's account.
func findOrphans(ctx context.Context, q *provisiondb.Queries, p provision.Provider, deployment string) ([]orphan, error) {
	lctx, cancel := context.WithTimeout(ctx, checkProvider)
	held, err := p.List(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errProviderList, err)
	}
	var mine []orphan
	var ids []uuid.UUID
	for _, pm := range held {
		if pm.State == provision.ProviderGone || pm.Tags[provision.TagDeployment] != deployment {
			continue
		}
		o := orphan{Machine: pm, tag: pm.Tags[provision.TagMachine]}
		if id := o.machineID(); id != uuid.Nil {
			ids = append(ids, id)
		}
		mine = append(mine, o)
	}
	live := []uuid.UUID{}
	if len(ids) > 0 {
		if live, err = q.LiveMachineIDsAmong(ctx, ids); err != nil {
			return nil, fmt.Errorf("read the machines the provider's resources name: %w", err)
		}
	}
	return slices.DeleteFunc(mine, func(o orphan) bool {
		id := o.machineID()
		return id != uuid.Nil && slices.Contains(live, id)
	}), nil
}

// OrphanSweeperOptions configure the orphan sweep.
type OrphanSweeperOptions struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Secret is the deployment secret: it opens classes' credentials and loads the PKI whose
	// trust domain is the deployment tag.
	Secret string
	// Config is the module's; the sweep uses its orphans section.
	Config Config
	// Providers are the enabled factories by kind.
	Providers Providers
	// Now is the sweep's clock, time.Now when nil; orphans age by it.
	Now func() time.Time
}

// OrphanSweeper is the orphan sweep: a reconciler keyed by class that lists the class's
// provider every orphans.interval, records each orphan the first time it finds it (an event,
// machine.orphan_found) and, when orphans.remove is set, deletes at the provider those first
// found more than orphans.minAge ago (machine.orphan_removed once the provider deleted it).
//
// Every step is safe to repeat after a crash: Delete is idempotent; the Delete is marked before
// it is asked for, so a sweep that died before recording its outcome records it the next time,
// when the provider no longer lists the resource; and an orphan found again is not announced
// again.
type OrphanSweeper struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	cfg  OrphansConfig
	open opener
	pki  func(context.Context) (string, error)
	now  func() time.Time
}

// NewOrphanSweeper returns the sweep.
func NewOrphanSweeper(opts OrphanSweeperOptions) (*OrphanSweeper, error) {
	s, err := sealersFor(opts.Secret)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &OrphanSweeper{
		pool: opts.Pool, log: log.With("kind", OrphansKind), cfg: opts.Config.Orphans.withDefaults(),
		open: opener{providers: opts.Providers, seal: s, egress: egressOf(opts.Config)}, pki: trustDomain(opts.Pool, opts.Secret), now: now,
	}, nil
}

// trustDomain loads the deployment's trust domain, the deployment tag, once it loads.
func trustDomain(pool *pgxpool.Pool, secret string) func(context.Context) (string, error) {
	var mu sync.Mutex
	var domain string
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if domain != "" {
			return domain, nil
		}
		b, err := pki.Load(ctx, pool, secret)
		if err != nil {
			return "", fmt.Errorf("load the PKI: %w", err)
		}
		domain = b.TrustDomain()
		return domain, nil
	}
}

// Registration runs the sweep in the controllers role: the resync enqueues every class every
// orphans.interval, and the reconcile queue lets one worker at a time sweep a class.
func (s *OrphanSweeper) Registration() reconcile.Registration {
	return reconcile.Registration{
		Reconciler: s, Role: reconcile.RoleControllers, Timeout: 5 * time.Minute, Concurrency: 2,
		ResyncEvery: s.cfg.Interval,
		Resync: func(ctx context.Context) ([]string, error) {
			rows, err := provisiondb.New(s.pool).ListOrphanClassKeys(ctx)
			if err != nil {
				return nil, err
			}
			keys := make([]string, len(rows))
			for i, r := range rows {
				keys[i] = classKey(r.TenantID, r.Name)
			}
			return keys, nil
		},
	}
}

// Kind is OrphansKind.
func (s *OrphanSweeper) Kind() string { return OrphansKind }

func classKey(tenant uuid.UUID, name string) string { return tenant.String() + "/" + name }

// Reconcile sweeps one class. A class that is gone, or whose provider cannot be opened (the
// providers doctor check reports it), is skipped until the next resync.
func (s *OrphanSweeper) Reconcile(ctx context.Context, key string) error {
	t, name, _ := strings.Cut(key, "/")
	tenant, err := uuid.Parse(t)
	if err != nil {
		return nil // not a class
	}
	c, err := provisiondb.New(s.pool).GetClass(ctx, provisiondb.GetClassParams{TenantID: tenant, Name: name})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read class %s: %w", key, err)
	}
	p, err := s.open.open(c)
	if err != nil {
		s.log.Warn("cannot sweep a class for orphans", "class", key, "err", err)
		return nil
	}
	deployment, err := s.pki(ctx)
	if err != nil {
		return err
	}
	if err := s.sweep(ctx, c, p, deployment); err != nil {
		return fmt.Errorf("class %s: %w", key, err)
	}
	return nil
}

// sweep records the class's orphans and removes those old enough, when removal is on.
func (s *OrphanSweeper) sweep(ctx context.Context, c provisiondb.ProvisionClass, p provision.Provider, deployment string) error {
	orphans, err := findOrphans(ctx, provisiondb.New(s.pool), p, deployment)
	if err != nil {
		return err
	}
	now := s.now()
	seen := make([]provisiondb.SeeOrphanRow, len(orphans))
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q, cq := provisiondb.New(tx), db.New(tx)
		listed := make([]string, len(orphans))
		for i, o := range orphans {
			listed[i] = o.ProviderID
			row, err := q.SeeOrphan(ctx, provisiondb.SeeOrphanParams{
				TenantID: c.TenantID, Class: c.Name, ProviderID: o.ProviderID, MachineTag: o.tag, Now: now,
			})
			if err != nil {
				return fmt.Errorf("record orphan %s: %w", o.ProviderID, err)
			}
			seen[i] = row
			if row.Inserted {
				s.log.Warn("provider resource without a machine", "class", c.Name, "tenant", c.TenantID, "provider_id", o.ProviderID, "machine_tag", o.tag)
				if err := event.Emit(ctx, cq, c.TenantID, event.MachineOrphanFound{MachineOrphan: orphanPayload(c, o, row.FirstSeen)}); err != nil {
					return err
				}
			}
		}
		gone, err := q.ForgetOrphans(ctx, provisiondb.ForgetOrphansParams{TenantID: c.TenantID, Class: c.Name, Listed: listed})
		if err != nil {
			return fmt.Errorf("forget the orphans no longer listed: %w", err)
		}
		for _, r := range gone {
			if r.RemovingSince != nil && r.RemovedAt == nil { // deleted by a sweep that died before recording it
				o := orphan{Machine: provision.Machine{ProviderID: r.ProviderID}, tag: r.MachineTag}
				if err := event.Emit(ctx, cq, c.TenantID, event.MachineOrphanRemoved{MachineOrphan: orphanPayload(c, o, r.FirstSeen)}); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil || !s.cfg.Remove {
		return err
	}
	var errs []error
	for i, o := range orphans {
		if now.Sub(seen[i].FirstSeen) < s.cfg.MinAge {
			continue
		}
		if err := s.remove(ctx, c, p, o, seen[i], now); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// remove deletes one orphan at its provider, marked before and recorded after.
func (s *OrphanSweeper) remove(ctx context.Context, c provisiondb.ProvisionClass, p provision.Provider, o orphan, seen provisiondb.SeeOrphanRow, now time.Time) error {
	key := provisiondb.MarkOrphanRemovingParams{TenantID: c.TenantID, Class: c.Name, ProviderID: o.ProviderID, Now: now}
	if err := provisiondb.New(s.pool).MarkOrphanRemoving(ctx, key); err != nil {
		return fmt.Errorf("mark orphan %s: %w", o.ProviderID, err)
	}
	if seen.RemovedAt != nil {
		s.log.Warn("a removed orphan is still listed by its provider; deleting it again", "class", c.Name, "provider_id", o.ProviderID)
	}
	dctx, cancel := context.WithTimeout(ctx, orphanDelete)
	err := p.Delete(dctx, o.ProviderID)
	cancel()
	if err != nil {
		return fmt.Errorf("delete orphan %s: %w", o.ProviderID, err)
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		firstSeen, err := provisiondb.New(tx).MarkOrphanRemoved(ctx, provisiondb.MarkOrphanRemovedParams(key))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // recorded already
		}
		if err != nil {
			return fmt.Errorf("record orphan %s removed: %w", o.ProviderID, err)
		}
		s.log.Info("removed a provider resource without a machine", "class", c.Name, "tenant", c.TenantID, "provider_id", o.ProviderID, "machine_tag", o.tag)
		return event.Emit(ctx, db.New(tx), c.TenantID, event.MachineOrphanRemoved{MachineOrphan: orphanPayload(c, o, firstSeen)})
	})
}

func orphanPayload(c provisiondb.ProvisionClass, o orphan, firstSeen time.Time) event.MachineOrphan {
	tag := o.tag
	if len(tag) > 256 {
		tag = strings.ToValidUTF8(tag[:256], "")
	}
	return event.MachineOrphan{
		ID: o.machineID(), Class: c.Name, Provider: c.Provider, ProviderID: o.ProviderID, MachineTag: tag, FirstSeen: firstSeen,
	}
}
