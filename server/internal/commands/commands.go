// Package commands implements bettercompute.commands.v1.CommandsService: creating, reading and
// cancelling the commands of the caller's tenant. Every query takes the caller's tenant id, so
// commands and nodes of other tenants are simply not found. Gateways deliver commands and
// record their progress (workers/commands holds the life cycle); after a create commits, the
// service only pokes the gateways so they need not wait for their dispatch loop.
package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/quota"
)

// Service answers CommandsService calls.
type Service struct {
	pool     *pgxpool.Pool
	admit    *admission.Admitter
	notifier Notifier
	reserve  *quota.CommandReserver
}

// Notifier tells gateways that nodes have new commands (gateway.Notifier does, over the
// internal control API). Best effort: gateways also find new commands within a second.
type Notifier interface {
	CommandsCreated(ctx context.Context, nodeIDs []uuid.UUID)
}

var _ commandsv1connect.CommandsServiceHandler = (*Service)(nil)

// New returns the service; notifier may be nil.
func New(pool *pgxpool.Pool, admit *admission.Admitter, notifier Notifier) *Service {
	return &Service{pool: pool, admit: admit, notifier: notifier, reserve: quota.NewCommandReserver(db.New(pool))}
}

// Limits of commands/create.
const (
	DefaultTimeout = 5 * time.Minute
	MaxTimeout     = 24 * time.Hour
	// MaxSelected bounds the nodes one create may address through a selector.
	MaxSelected = 1000
)

// Create queues a command for a node or for the live nodes matching a selector.
func (s *Service) Create(ctx context.Context, req *commandsv1.CreateRequest) (*commandsv1.CreateResponse, error) {
	if (req.GetNodeId() == "") == (len(req.GetLabelSelector()) == 0) {
		return nil, apierr.InvalidArgument("node_id", "set exactly one of node_id and label_selector")
	}
	var nodeID uuid.UUID
	var selector []byte
	var err error
	if req.GetNodeId() != "" {
		if nodeID, err = apierr.ParseID("node_id", req.GetNodeId()); err != nil {
			return nil, err
		}
	} else {
		if err := fleet.ValidateLabels("label_selector", req.GetLabelSelector()); err != nil {
			return nil, err
		}
		selector = fleet.EncodeLabels(req.GetLabelSelector())
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
	key := req.GetIdempotencyKey()
	if len(key) > 255 {
		return nil, apierr.InvalidArgument("idempotency_key", "must be at most 255 characters")
	}
	if key == "" {
		key = uuid.NewString()
	}
	tid := auth.Caller(ctx).TenantID
	targets, what, err := s.targets(ctx, tid, nodeID, selector)
	if err != nil {
		return nil, err
	}
	// Reserved before the transaction, in a short one of its own that the creates of the tenant
	// arriving meanwhile share: they never queue on the cap's lock one by one, nor for each
	// other's commits.
	if err := s.reserve.Reserve(ctx, tid, len(targets)); err != nil {
		if refusal, ok := quota.CommandsRefusal(ctx, err, len(targets)); ok {
			return nil, refusal
		}
		return nil, fmt.Errorf("reserve %d commands: %w", len(targets), err)
	}
	res, err := admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*commandsv1.CreateResponse, error) {
		tx.Target(what[0], what[1])
		out := &commandsv1.CreateResponse{}
		deadline := time.Now().Add(timeout)
		for _, node := range targets {
			id := uuid.Must(uuid.NewV7())
			c, err := tx.Q.CreateCommand(ctx, db.CreateCommandParams{
				ID: id, TenantID: tid, NodeID: node, Type: typ,
				Payload: payload, IdempotencyKey: key, Deadline: deadline,
			})
			if err != nil {
				return nil, fmt.Errorf("create command for node %s: %w", node, err)
			}
			if err := tx.Emit(tid, event.CommandCreated{CommandRef: event.CommandRef{ID: c.ID, NodeID: node, Type: string(c.Type)}}); err != nil {
				return nil, err
			}
			pc, err := commandToProto(c)
			if err != nil {
				return nil, err
			}
			out.Commands = append(out.Commands, pc)
		}
		return out, nil
	})
	if err == nil && s.notifier != nil && len(targets) > 0 {
		s.notifier.CommandsCreated(ctx, targets)
	}
	return res, err
}

// targets resolves the nodes a create addresses, before its transaction (the reservation of its
// commands needs their number): the node, if it is the tenant's and not revoked, or the live
// nodes the selector matches. what names them for the audit row. A node revoked after this
// read gets a command that is never delivered and expires.
func (s *Service) targets(ctx context.Context, tid, nodeID uuid.UUID, selector []byte) (nodes []uuid.UUID, what [2]string, err error) {
	q := db.New(s.pool)
	if selector == nil {
		n, err := q.GetNode(ctx, db.GetNodeParams{TenantID: tid, ID: nodeID})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, what, apierr.NotFound("node %s not found", nodeID)
		} else if err != nil {
			return nil, what, err
		}
		if n.RevokedAt != nil {
			return nil, what, apierr.FailedPrecondition("node %s is revoked", nodeID)
		}
		return []uuid.UUID{nodeID}, [2]string{"node", nodeID.String()}, nil
	}
	ids, err := q.SelectNodeIDs(ctx, db.SelectNodeIDsParams{TenantID: tid, Selector: selector, Lim: MaxSelected + 1})
	if err != nil {
		return nil, what, err
	}
	switch {
	case len(ids) == 0:
		return nil, what, apierr.FailedPrecondition("no live node matches the selector")
	case len(ids) > MaxSelected:
		return nil, what, apierr.InvalidArgument("label_selector", "matches more than %d nodes; narrow it", MaxSelected)
	}
	return ids, [2]string{"selector", string(selector)}, nil
}

// Get returns a command of the caller's tenant.
func (s *Service) Get(ctx context.Context, req *commandsv1.GetRequest) (*commandsv1.GetResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	c, err := db.New(s.pool).GetCommand(ctx, db.GetCommandParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "command %s not found", id)
	}
	pc, err := commandToProto(c)
	if err != nil {
		return nil, err
	}
	return &commandsv1.GetResponse{Command: pc}, nil
}

// List lists the commands of the caller's tenant in id (creation) order, optionally of one node,
// in one state or of one fan-out.
func (s *Service) List(ctx context.Context, req *commandsv1.ListRequest) (*commandsv1.ListResponse, error) {
	params := db.ListCommandsParams{TenantID: auth.Caller(ctx).TenantID}
	if n := req.GetNodeId(); n != "" {
		id, err := apierr.ParseID("node_id", n)
		if err != nil {
			return nil, err
		}
		params.NodeID = &id
	}
	if st := req.GetState(); st != commandsv1.CommandState_COMMAND_STATE_UNSPECIFIED {
		ls, ok := stateFromProto(st)
		if !ok {
			return nil, apierr.InvalidArgument("state", "unknown state %v", st)
		}
		params.State = &ls
	}
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	if f := req.GetFanOutId(); f != "" {
		id, err := apierr.ParseID("fan_out_id", f)
		if err != nil {
			return nil, err
		}
		params.FanOutID = &id
	}
	params.After, params.Lim = after, size+1
	rows, err := db.New(s.pool).ListCommands(ctx, params)
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(c db.Command) uuid.UUID { return c.ID })
	res := &commandsv1.ListResponse{NextPageToken: next}
	for _, c := range rows {
		pc, err := commandToProto(c)
		if err != nil {
			return nil, err
		}
		res.Commands = append(res.Commands, pc)
	}
	return res, nil
}

// Cancel cancels an unfinished command of the caller's tenant, with its audit row and a
// "command.cancelled" event.
func (s *Service) Cancel(ctx context.Context, req *commandsv1.CancelRequest) (*commandsv1.CancelResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	tid := auth.Caller(ctx).TenantID
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*commandsv1.CancelResponse, error) {
		tx.Target("command", id)
		c, err := tx.Q.LockCommand(ctx, db.LockCommandParams{TenantID: tid, ID: id})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "command %s not found", id)
		}
		from := command.State(c.State)
		if !command.CanTransition(from, command.Cancelled) {
			return nil, apierr.FailedPrecondition("command %s is %s; only pending, sent or acked commands can be cancelled", id, from)
		}
		c, err = tx.Q.CancelCommand(ctx, db.CancelCommandParams{TenantID: tid, ID: id})
		if err != nil {
			return nil, fmt.Errorf("cancel command %s: %w", id, err)
		}
		if err := tx.Emit(tid, event.CommandCancelled{
			CommandRef: event.CommandRef{ID: id, NodeID: c.NodeID, Type: string(c.Type)}, PreviousState: string(from),
		}); err != nil {
			return nil, err
		}
		pc, err := commandToProto(c)
		if err != nil {
			return nil, err
		}
		return &commandsv1.CancelResponse{Command: pc}, nil
	})
}

var stateToProto = map[command.State]commandsv1.CommandState{
	command.Pending:   commandsv1.CommandState_COMMAND_STATE_PENDING,
	command.Sent:      commandsv1.CommandState_COMMAND_STATE_SENT,
	command.Acked:     commandsv1.CommandState_COMMAND_STATE_ACKED,
	command.Succeeded: commandsv1.CommandState_COMMAND_STATE_SUCCEEDED,
	command.Failed:    commandsv1.CommandState_COMMAND_STATE_FAILED,
	command.Expired:   commandsv1.CommandState_COMMAND_STATE_EXPIRED,
	command.Cancelled: commandsv1.CommandState_COMMAND_STATE_CANCELLED,
}

func stateFromProto(p commandsv1.CommandState) (command.State, bool) {
	for s, v := range stateToProto {
		if v == p {
			return s, true
		}
	}
	return "", false
}

func commandToProto(c db.Command) (*commandsv1.Command, error) {
	out := &commandsv1.Command{
		Id: c.ID.String(), TenantId: c.TenantID.String(), NodeId: c.NodeID.String(), Type: c.Type,
		State: stateToProto[command.State(c.State)], IdempotencyKey: c.IdempotencyKey,
		DeadlineTime: timestamppb.New(c.Deadline), Attempts: c.Attempts, Error: c.Error,
		CreateTime: timestamppb.New(c.CreatedAt), SendTime: optionalTime(c.SentAt),
		AckTime: optionalTime(c.AckedAt), FinishTime: optionalTime(c.FinishedAt),
		UpdateTime: timestamppb.New(c.UpdatedAt),
	}
	p, err := command.Decode(c.Type, c.Payload)
	if err != nil {
		return nil, fmt.Errorf("command %s: %w", c.ID, err)
	}
	if err := command.SetPayload(out, p); err != nil {
		return nil, fmt.Errorf("command %s: %w", c.ID, err)
	}
	if out.Result, err = jsonStruct(c.Result); err != nil {
		return nil, fmt.Errorf("command %s result: %w", c.ID, err)
	}
	return out, nil
}

// payloadFromRequest returns the type and the stored form of a create's typed payload: exactly
// one case of its payload oneof, within the bounds of command.Validate (errors name the field,
// for example "exec.path").
func payloadFromRequest(req proto.Message) (string, []byte, error) {
	typ, p := command.PayloadOf(req)
	if typ == "" {
		return "", nil, apierr.InvalidArgument("payload", "set exactly one command: %s", strings.Join(command.Types(), ", "))
	}
	field := string(req.ProtoReflect().WhichOneof(req.ProtoReflect().Descriptor().Oneofs().ByName("payload")).Name())
	if err := command.Validate(p); err != nil {
		var fe *command.FieldError
		if errors.As(err, &fe) {
			return "", nil, apierr.InvalidArgument(field+"."+fe.Field, "%s", fe.Msg)
		}
		return "", nil, apierr.InvalidArgument(field, "%v", err)
	}
	b, err := command.Encode(p)
	if err != nil {
		return "", nil, apierr.InvalidArgument(field, "%v", err)
	}
	return typ, b, nil
}

// jsonStruct decodes a JSON object column; nil stays nil.
func jsonStruct(b []byte) (*structpb.Struct, error) {
	if len(b) == 0 || strings.TrimSpace(string(b)) == "null" {
		return nil, nil
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

func optionalTime(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}
