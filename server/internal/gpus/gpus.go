// Package gpus implements bettercompute.gpus.v1.GpusService: the GPUs of the caller's tenant's
// nodes with their health (issue 33), fleet wide. A GPU is a row of devices (kind 'gpu'), known
// by its UUID; the health reconciler keeps its health, reasons and history, and this package
// only reads them (List, Get, Summary). Quarantine and Clear, which change them, are in
// operate.go. Every statement binds the caller's tenant through nodes.tenant_id, so another
// tenant's GPU is simply not found.
package gpus

import (
	"context"
	"fmt"
	"math"
	"regexp"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1/gpusv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/page"
)

// Limits of the requests, as gpus.proto documents them.
const (
	// DefaultPageSize and MaxPageSize bound gpus/list's pages: GPUs are small rows and a fleet
	// view wants many at once, so more than page's default.
	DefaultPageSize = 100
	MaxPageSize     = 1000
	// DefaultHistorySize and MaxHistorySize bound the history gpus/get returns.
	DefaultHistorySize = 50
	MaxHistorySize     = 500
	maxModelLen        = 256
	maxPoolLen         = 63
)

// gpuUUID is what a GPU UUID may be: 1 to 128 printable ASCII characters without spaces
// (nvidia-smi's "GPU-" and a UUID, or a simulator's name; MIG devices add slashes).
var gpuUUID = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)

// Service answers GpusService calls.
type Service struct {
	pool  *pgxpool.Pool
	admit *admission.Admitter
	// policy decides health after an operator's quarantine or clear, as the health reconciler's
	// does after a signal.
	policy gpuhealth.Policy
}

var _ gpusv1connect.GpusServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter) *Service {
	return &Service{pool: pool, admit: admit, policy: gpuhealth.DefaultPolicy()}
}

// listKey is gpus/list's page key: the order of the list, node, index, and the device row's id
// (a missing GPU and its replacement can share an index).
type listKey struct {
	Node  uuid.UUID `json:"n"`
	Index int32     `json:"i"`
	ID    int64     `json:"d"`
}

// firstGPU is before every GPU.
var firstGPU = listKey{Node: uuid.Nil, Index: math.MinInt32}

// checkUUID validates a request's GPU UUID.
func checkUUID(s string) error {
	if !gpuUUID.MatchString(s) {
		return apierr.InvalidArgument("uuid", "must be a GPU UUID (1 to 128 printable characters, as nvidia-smi -L shows it), got %q", s)
	}
	return nil
}

// checkPool validates a pool filter; empty is none.
func checkPool(s string) error {
	if len(s) > maxPoolLen {
		return apierr.InvalidArgument("pool", "must be at most %d characters", maxPoolLen)
	}
	return nil
}

// List lists the tenant's GPUs that match every filter, ordered by node id and index.
func (s *Service) List(ctx context.Context, req *gpusv1.ListRequest) (*gpusv1.ListResponse, error) {
	params := db.ListGPUsParams{
		TenantID: auth.Caller(ctx).TenantID, Model: req.GetModel(), Pool: req.GetPool(), Present: req.Present,
		Health: make([]string, 0, len(req.GetHealth())),
	}
	// Every bad field is reported, not only the first.
	var errs []error
	for i, st := range req.GetHealth() {
		h, ok := healthOf(st)
		if !ok {
			errs = append(errs, apierr.InvalidArgument(fmt.Sprintf("health[%d]", i), "must be HEALTH_STATE_HEALTHY, HEALTH_STATE_DEGRADED or HEALTH_STATE_UNHEALTHY, got %v", st))
			continue
		}
		params.Health = append(params.Health, string(h))
	}
	if len(req.GetModel()) > maxModelLen {
		errs = append(errs, apierr.InvalidArgument("model", "must be at most %d characters", maxModelLen))
	}
	nodeID, err := apierr.ParseOptionalID("node_id", req.GetNodeId())
	errs = append(errs, err)
	params.NodeID = nodeID
	errs = append(errs, checkPool(req.GetPool()))
	size, err := page.SizeWithin(req.GetPageSize(), DefaultPageSize, MaxPageSize)
	errs = append(errs, err)
	after, err := page.Parse(req.GetPageToken(), firstGPU)
	errs = append(errs, err)
	if err := apierr.Join(errs...); err != nil {
		return nil, err
	}
	params.AfterNode, params.AfterIdx, params.AfterID, params.Lim = after.Node, after.Index, after.ID, size+1
	rows, err := db.New(s.pool).ListGPUs(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("list GPUs: %w", err)
	}
	rows, next := page.Next(rows, size, func(r db.ListGPUsRow) listKey {
		return listKey{Node: r.Device.NodeID, Index: r.Device.Idx, ID: r.Device.ID}
	})
	res := &gpusv1.ListResponse{NextPageToken: next, Gpus: make([]*gpusv1.Gpu, 0, len(rows))}
	for _, r := range rows {
		g, err := gpuToProto(r.Device, r.Hostname, r.LeaseID)
		if err != nil {
			return nil, err
		}
		res.Gpus = append(res.Gpus, g)
	}
	return res, nil
}

// Get returns the tenant's GPU of a UUID with its latest history entries, newest first. A GPU
// moved between two nodes of the tenant is the row of the node that has it now (present, else
// the one updated last).
func (s *Service) Get(ctx context.Context, req *gpusv1.GetRequest) (*gpusv1.GetResponse, error) {
	var sizeErr error
	if req.GetHistorySize() < 0 {
		sizeErr = apierr.InvalidArgument("history_size", "must not be negative")
	}
	if err := apierr.Join(checkUUID(req.GetUuid()), sizeErr); err != nil {
		return nil, err
	}
	size := req.GetHistorySize()
	switch {
	case size == 0:
		size = DefaultHistorySize
	case size > MaxHistorySize:
		size = MaxHistorySize
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	row, err := q.GetGPU(ctx, db.GetGPUParams{TenantID: tenant, Uuid: req.GetUuid()})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "GPU %s not found", req.GetUuid())
	}
	g, err := gpuToProto(row.Device, row.Hostname, row.LeaseID)
	if err != nil {
		return nil, err
	}
	changes, err := q.ListGPUHealthChanges(ctx, db.ListGPUHealthChangesParams{TenantID: tenant, DeviceID: row.Device.ID, Lim: size})
	if err != nil {
		return nil, fmt.Errorf("GPU %s: history: %w", req.GetUuid(), err)
	}
	res := &gpusv1.GetResponse{Gpu: g, History: make([]*gpusv1.HealthChange, 0, len(changes))}
	for _, c := range changes {
		hc, err := changeToProto(c)
		if err != nil {
			return nil, fmt.Errorf("GPU %s: %w", req.GetUuid(), err)
		}
		res.History = append(res.History, hc)
	}
	return res, nil
}

// Summary counts the tenant's GPUs (of a pool's members, when the request names one) by model
// and health, the degraded and unhealthy ones by reason, and the nodes quarantined as a whole or
// whose driver did not answer.
func (s *Service) Summary(ctx context.Context, req *gpusv1.SummaryRequest) (*gpusv1.SummaryResponse, error) {
	if err := checkPool(req.GetPool()); err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	states, err := q.CountGPUsByHealth(ctx, db.CountGPUsByHealthParams{TenantID: tenant, Pool: req.GetPool()})
	if err != nil {
		return nil, fmt.Errorf("count GPUs by health: %w", err)
	}
	reasons, err := q.CountGPUHealthReasons(ctx, db.CountGPUHealthReasonsParams{TenantID: tenant, Pool: req.GetPool()})
	if err != nil {
		return nil, fmt.Errorf("count GPUs by health reason: %w", err)
	}
	nodes, err := q.CountNodeGPUHealth(ctx, db.CountNodeGPUHealthParams{TenantID: tenant, Pool: req.GetPool()})
	if err != nil {
		return nil, fmt.Errorf("count nodes by GPU health: %w", err)
	}
	res := &gpusv1.SummaryResponse{
		States:                  make([]*gpusv1.StateCount, 0, len(states)),
		Reasons:                 make([]*gpusv1.ReasonCount, 0, len(reasons)),
		QuarantinedNodes:        nodes.QuarantinedNodes,
		NodesDriverNotAnswering: nodes.NodesDriverNotAnswering,
	}
	for _, c := range states {
		res.States = append(res.States, &gpusv1.StateCount{Model: c.Model, Health: HealthState(c.Health), Gpus: c.Gpus})
	}
	for _, c := range reasons {
		res.Reasons = append(res.Reasons, &gpusv1.ReasonCount{Check: c.CheckName, Code: c.Code, Effect: c.Effect, Gpus: c.Gpus})
	}
	return res, nil
}
