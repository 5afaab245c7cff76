package client

import (
	"context"
	"iter"
)

// All iterates over every item of a paged list, calling page with each next_page_token until
// the server returns an empty one. It stops at the first error, which it yields.
//
//	for n, err := range client.All(ctx, func(ctx context.Context, token string) ([]*nodesv1.Node, string, error) {
//		res, err := c.Nodes.List(ctx, &nodesv1.ListRequest{PageToken: token})
//		return res.GetNodes(), res.GetNextPageToken(), err
//	}) {
//		...
//	}
func All[T any](ctx context.Context, page func(ctx context.Context, pageToken string) (items []T, nextPageToken string, err error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		token := ""
		for {
			items, next, err := page(ctx, token)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, item := range items {
				if !yield(item, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}
