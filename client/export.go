package client

import (
	"context"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"

	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
)

// ExportPageRows is the page size ExportUsage asks for: the most rows the API returns in one
// usage/export call.
const ExportPageRows = 10_000

// ExportUsage writes a whole usage export to w, one page (one usage/export call) at a time, so
// neither the server nor the caller holds more than a page: the pages' data concatenated is the
// export (a CSV header once, then the rows). req's page_token is ignored, and its page_size is
// ExportPageRows when zero. It returns the rows written; on an error, w may hold the first pages,
// which are not the whole export.
func (c *Client) ExportUsage(ctx context.Context, req *usagev1.ExportRequest, w io.Writer) (int64, error) {
	req = proto.CloneOf(req)
	if req.GetPageSize() == 0 {
		req.PageSize = ExportPageRows
	}
	req.PageToken = ""
	var rows int64
	for {
		res, err := c.Usage.Export(ctx, req)
		if err != nil {
			return rows, err
		}
		if _, err := w.Write(res.GetData()); err != nil {
			return rows, fmt.Errorf("write the usage export: %w", err)
		}
		rows += res.GetRows()
		if res.GetNextPageToken() == "" {
			return rows, nil
		}
		req.PageToken = res.GetNextPageToken()
	}
}
