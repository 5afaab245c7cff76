package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/quota"
)

// Limits of commands/fanOut.
const (
	// MaxFanOutNodes bounds the nodes one fan-out reaches; a selector matching more needs
	// selector.limit.
	MaxFanOutNodes = 100_000
	// MaxFanOutNodeIDs bounds selector.node_ids.
	MaxFanOutNodeIDs = 10_000
	// MaxInFlight is the server-wide cap of a fan-out's max_in_flight. A gateway claims at most
	// 1,000 commands a statement and its sessions' queues and results' queue are bounded, so what
	// is in flight bounds the database's rows in sent and acked, not any one write.
	MaxInFlight = 10_000
	// DefaultMaxInFlight is a fan-out's max_in_flight when the request leaves it 0.
	DefaultMaxInFlight = 1000
	// MaxFanOutFailures bounds the failures commands/getFanOut lists.
	MaxFanOutFailures = 20
	// maxSelectorText bounds the selector's text fields, as nodes/list bounds its filters.
	maxSelectorText = 256
)

// FanOutNotifier tells gateways that a fan-out has new commands: one poke per gateway holding a
// session of one of its nodes, not one per node (gateway.Notifier does). A Notifier that also
// implements it is used for fan-outs; otherwise gateways find them within a second.
type FanOutNotifier interface {
	FanOutCreated(ctx context.Context, fanOutID uuid.UUID)
}

// fanOutSelection is a validated selector in the form the fan-out queries take.
type fanOutSelection struct {
	labels   []byte
	nodeIDs  []uuid.UUID
	states   []string
	online   *bool
	gpuModel string
	pool     string
	lim      int32
}

// parseSelector validates the selector, naming every bad field ("selector.node_ids", …).
func parseSelector(sel *commandsv1.FanOutSelector) (fanOutSelection, error) {
	f := fanOutSelection{nodeIDs: []uuid.UUID{}, states: []string{}, online: onlineOf(sel),
		gpuModel: sel.GetGpuModel(), pool: sel.GetPool()}
	if sel == nil || (len(sel.GetLabels()) == 0 && len(sel.GetNodeIds()) == 0 && len(sel.GetStates()) == 0 &&
		f.online == nil && sel.GetGpuModel() == "" && sel.GetPool() == "" && sel.GetLimit() == 0) {
		return f, apierr.InvalidArgument("selector", "set at least one field: labels, pool, node_ids, gpu_model, states, online or limit")
	}
	errs := []error{fleet.ValidateLabels("selector.labels", sel.GetLabels())}
	if len(sel.GetLabels()) > 0 {
		f.labels = fleet.EncodeLabels(sel.GetLabels())
	}
	if n := len(sel.GetNodeIds()); n > MaxFanOutNodeIDs {
		errs = append(errs, apierr.InvalidArgument("selector.node_ids", "at most %d ids, got %d", MaxFanOutNodeIDs, n))
	} else {
		for _, s := range sel.GetNodeIds() {
			id, err := apierr.ParseID("selector.node_ids", s)
			if err != nil {
				errs = append(errs, err)
				break
			}
			f.nodeIDs = append(f.nodeIDs, id)
		}
	}
	for _, s := range sel.GetStates() {
		if !db.NodeState(s).Valid() {
			errs = append(errs, apierr.InvalidArgument("selector.states", "unknown state %q; want one of %s", s, nodeStateNames()))
			break
		}
		f.states = append(f.states, s)
	}
	errs = append(errs, selectorText("selector.gpu_model", f.gpuModel), selectorText("selector.pool", f.pool))
	switch l := sel.GetLimit(); {
	case l < 0 || l > MaxFanOutNodes:
		errs = append(errs, apierr.InvalidArgument("selector.limit", "must be between 0 and %d", MaxFanOutNodes))
	case l == 0:
		f.lim = MaxFanOutNodes + 1
	default:
		f.lim = l
	}
	if err := apierr.Join(errs...); err != nil {
		return fanOutSelection{}, err
	}
	return f, nil
}

// onlineOf is the selector's online field, nil when unset (or when sel is nil).
func onlineOf(sel *commandsv1.FanOutSelector) *bool {
	if sel == nil || sel.Online == nil {
		return nil
	}
	v := *sel.Online
	return &v
}

func selectorText(field, s string) error {
	if len(s) > maxSelectorText {
		return apierr.InvalidArgument(field, "at most %d characters, got %d", maxSelectorText, len(s))
	}
	if strings.ContainsRune(s, 0) {
		return apierr.InvalidArgument(field, "must not contain NUL characters")
	}
	return nil
}

func nodeStateNames() string {
	var names []string
	for _, s := range db.AllNodeStateValues() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}

// FanOut queues one command for every node the selector reaches, admitted once: the tenant's
// cap counts the nodes, and the fan-out, its commands and their command.created events are one
// statement in the admission transaction. Gateways are poked once each after the commit.
func (s *Service) FanOut(ctx context.Context, req *commandsv1.FanOutRequest) (*commandsv1.FanOutResponse, error) {
	sel, err := parseSelector(req.GetSelector())
	if err != nil {
		return nil, err
	}
	typ, payload, err := payloadFromRequest(req)
	if err != nil {
		return nil, err
	}
	timeout := DefaultTimeout
	if req.GetTimeout() != nil {
		if err := req.GetTimeout().CheckValid(); err != nil {
			return nil, apierr.InvalidArgument("timeout", "%v", err)
		}
		if timeout = req.GetTimeout().AsDuration(); timeout <= 0 || timeout > MaxTimeout {
			return nil, apierr.InvalidArgument("timeout", "must be positive and at most %s", MaxTimeout)
		}
	}
	inFlight := req.GetMaxInFlight()
	switch {
	case inFlight < 0 || inFlight > MaxInFlight:
		return nil, apierr.InvalidArgument("max_in_flight", "must be between 0 and %d (the server's limit)", MaxInFlight)
	case inFlight == 0:
		inFlight = DefaultMaxInFlight
	}
	key := req.GetIdempotencyKey()
	if len(key) > 255 {
		return nil, apierr.InvalidArgument("idempotency_key", "must be at most 255 characters")
	}
	if key == "" {
		key = uuid.NewString()
	}
	tid := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	if f, err := q.GetFanOutByKey(ctx, db.GetFanOutByKeyParams{TenantID: tid, IdempotencyKey: key}); err == nil {
		// A repeat: audited like the call that created it, and answered with that fan-out.
		return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*commandsv1.FanOutResponse, error) {
			tx.Target("fanOut", f.ID)
			return &commandsv1.FanOutResponse{FanOut: fanOutToProto(f)}, nil
		})
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("read fan-out by key: %w", err)
	}
	n, err := q.CountFanOutTargets(ctx, db.CountFanOutTargetsParams{
		TenantID: tid, Selector: sel.labels, NodeIds: sel.nodeIDs, States: sel.states, Online: sel.online,
		GpuModel: sel.gpuModel, Pool: sel.pool, Lim: sel.lim,
	})
	if err != nil {
		return nil, fmt.Errorf("count fan-out targets: %w", err)
	}
	switch {
	case n == 0:
		return nil, apierr.FailedPrecondition("no live node matches the selector")
	case n > MaxFanOutNodes:
		return nil, apierr.InvalidArgument("selector.limit", "the selector matches more than %d nodes; set a limit or narrow it", MaxFanOutNodes)
	}
	// Reserved before the transaction, as Create does, for every node the fan-out reaches.
	if err := s.reserve.Reserve(ctx, tid, int(n)); err != nil {
		if refusal, ok := quota.CommandsRefusal(ctx, err, int(n)); ok {
			return nil, refusal
		}
		return nil, fmt.Errorf("reserve %d commands: %w", n, err)
	}
	selDoc, err := protojson.Marshal(req.GetSelector())
	if err != nil {
		return nil, fmt.Errorf("encode selector: %w", err)
	}
	id := uuid.Must(uuid.NewV7())
	res, err := admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*commandsv1.FanOutResponse, error) {
		tx.Target("fanOut", id)
		f, err := tx.Q.CreateFanOut(ctx, db.CreateFanOutParams{
			ID: id, TenantID: tid, Type: typ, SelectorDoc: selDoc, IdempotencyKey: key, MaxInFlight: inFlight,
			Deadline: time.Now().Add(timeout), Selector: sel.labels, NodeIds: sel.nodeIDs, States: sel.states,
			Online: sel.online, GpuModel: sel.gpuModel, Pool: sel.pool, Lim: int32(n), Payload: payload,
		})
		if database.IsUniqueViolation(err) {
			return nil, apierr.AlreadyExists("a fan-out with idempotency key %q was created meanwhile; call again to read it", key)
		} else if err != nil {
			return nil, fmt.Errorf("create fan-out: %w", err)
		}
		return &commandsv1.FanOutResponse{FanOut: fanOutToProto(f)}, nil
	})
	if err == nil {
		if fn, ok := s.notifier.(FanOutNotifier); ok && res.GetFanOut().GetTotal() > 0 {
			fn.FanOutCreated(ctx, id)
		}
	}
	return res, err
}

// GetFanOut returns a fan-out of the caller's tenant with its commands counted by state and its
// first failures.
func (s *Service) GetFanOut(ctx context.Context, req *commandsv1.GetFanOutRequest) (*commandsv1.GetFanOutResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	tid := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	f, err := q.GetFanOut(ctx, db.GetFanOutParams{TenantID: tid, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "fan-out %s not found", id)
	}
	counts, err := q.CountFanOutStates(ctx, db.CountFanOutStatesParams{TenantID: tid, FanOutID: id})
	if err != nil {
		return nil, fmt.Errorf("count fan-out %s: %w", id, err)
	}
	out := &commandsv1.GetFanOutResponse{FanOut: fanOutToProto(f), Counts: &commandsv1.FanOutCounts{}}
	open := int64(0)
	for _, c := range counts {
		n := int32(c.Commands)
		switch c.State {
		case db.CommandStatePending:
			out.Counts.Pending = n
		case db.CommandStateSent:
			out.Counts.Sent = n
		case db.CommandStateAcked:
			out.Counts.Acked = n
		case db.CommandStateSucceeded:
			out.Counts.Succeeded = n
		case db.CommandStateFailed:
			out.Counts.Failed = n
		case db.CommandStateExpired:
			out.Counts.Expired = n
		case db.CommandStateCancelled:
			out.Counts.Cancelled = n
		}
		switch c.State {
		case db.CommandStatePending, db.CommandStateSent, db.CommandStateAcked:
			open += c.Commands
		}
	}
	out.Done = open == 0
	if out.Counts.Failed+out.Counts.Expired > 0 {
		rows, err := q.FanOutFailures(ctx, db.FanOutFailuresParams{TenantID: tid, FanOutID: id, Lim: MaxFanOutFailures})
		if err != nil {
			return nil, fmt.Errorf("fan-out %s failures: %w", id, err)
		}
		for _, c := range rows {
			pc, err := commandToProto(c)
			if err != nil {
				return nil, err
			}
			out.Failures = append(out.Failures, pc)
		}
	}
	return out, nil
}

func fanOutToProto(f db.FanOut) *commandsv1.FanOut {
	out := &commandsv1.FanOut{
		Id: f.ID.String(), Type: f.Type, Total: f.Total, MaxInFlight: f.MaxInFlight,
		IdempotencyKey: f.IdempotencyKey, DeadlineTime: timestamppb.New(f.Deadline), CreateTime: timestamppb.New(f.CreatedAt),
	}
	sel := &commandsv1.FanOutSelector{}
	if err := protojson.Unmarshal(f.Selector, sel); err == nil {
		out.Selector = sel
	}
	return out
}
