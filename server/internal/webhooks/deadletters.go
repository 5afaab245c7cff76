package webhooks

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	webhooksv1 "github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/webhook"
)

// ListDeadLetters pages through the parked events of a webhook of the caller's tenant, oldest
// first. A webhook of another tenant is not found.
func (s *Service) ListDeadLetters(ctx context.Context, req *webhooksv1.ListDeadLettersRequest) (*webhooksv1.ListDeadLettersResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), int64(0))
	if err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	if _, err := q.GetWebhook(ctx, db.GetWebhookParams{TenantID: tenant, ID: id}); err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "webhook %s not found", id)
	}
	rows, err := q.ListDeadLetters(ctx, db.ListDeadLettersParams{TenantID: tenant, WebhookID: id, After: after, Lim: size + 1})
	if err != nil {
		return nil, fmt.Errorf("list dead letters of webhook %s: %w", id, err)
	}
	rows, next := page.Next(rows, size, func(r db.ListDeadLettersRow) int64 { return r.OutboxID })
	res := &webhooksv1.ListDeadLettersResponse{NextPageToken: next}
	for _, r := range rows {
		data := &structpb.Value{}
		if err := data.UnmarshalJSON(r.Payload); err != nil {
			return nil, fmt.Errorf("dead letter %d: decode data: %w", r.OutboxID, err)
		}
		res.DeadLetters = append(res.DeadLetters, &webhooksv1.DeadLetter{
			EventId: webhook.EventID(r.OutboxID), Type: r.Type, Subject: r.Subject, Data: data,
			CreateTime: timestamppb.New(r.CreatedAt), ParkTime: timestamppb.New(r.ParkedAt), Error: r.Error, Queued: r.Replay,
		})
	}
	return res, nil
}

// ReplayDeadLetters queues a webhook's parked events for delivery and marks it healthy with a
// fresh retry schedule, in one transaction that takes turns with the sinks role's parking (both
// lock the webhook's row), so no event is both parked and left unqueued.
func (s *Service) ReplayDeadLetters(ctx context.Context, req *webhooksv1.ReplayDeadLettersRequest) (*webhooksv1.ReplayDeadLettersResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*webhooksv1.ReplayDeadLettersResponse, error) {
		tx.Target("webhook", id)
		n, err := tx.Q.MarkWebhookHealthy(ctx, db.MarkWebhookHealthyParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, fmt.Errorf("mark webhook %s healthy: %w", id, err)
		}
		if n == 0 {
			return nil, apierr.NotFound("webhook %s not found", id)
		}
		queued, err := tx.Q.QueueDeadLetters(ctx, db.QueueDeadLettersParams{TenantID: p.TenantID, WebhookID: id})
		if err != nil {
			return nil, fmt.Errorf("queue dead letters of webhook %s: %w", id, err)
		}
		if err := tx.Q.ClearSinkRetry(ctx, webhook.SinkName(id)); err != nil {
			return nil, fmt.Errorf("restart the retry schedule of webhook %s: %w", id, err)
		}
		if err := tx.Emit(p.TenantID, event.WebhookReplayed{ID: id, Queued: queued}); err != nil {
			return nil, err
		}
		return &webhooksv1.ReplayDeadLettersResponse{Queued: queued}, nil
	})
}
