package nodes

import (
	"context"
	"fmt"
	"math"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/page"
)

// InventoryHistory lists the inventories a node of the tenant reported, newest first.
func (s *Service) InventoryHistory(ctx context.Context, req *nodesv1.InventoryHistoryRequest) (*nodesv1.InventoryHistoryResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	size, before, err := page.Of(req.GetPageSize(), req.GetPageToken(), int64(math.MaxInt64))
	if err != nil {
		return nil, err
	}
	tenant := auth.Caller(ctx).TenantID
	q := db.New(s.pool)
	if _, err := q.GetNode(ctx, db.GetNodeParams{TenantID: tenant, ID: id}); err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "node %s not found", id)
	}
	rows, err := q.ListNodeInventoryHistory(ctx, db.ListNodeInventoryHistoryParams{TenantID: tenant, NodeID: id, Before: before, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(r db.ListNodeInventoryHistoryRow) int64 { return r.ID })
	res := &nodesv1.InventoryHistoryResponse{NextPageToken: next}
	for _, r := range rows {
		inv, err := decodeInventory(r.Inventory)
		if err != nil {
			return nil, fmt.Errorf("node %s: inventory record %d: %w", id, r.ID, err)
		}
		res.Records = append(res.Records, &nodesv1.InventoryRecord{Inventory: inv, RecordTime: timestamppb.New(r.RecordedAt)})
	}
	return res, nil
}
