package gateway

import (
	"context"
	"io"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/pki"
)

type nodeKey struct{}

// bodyKey holds the request body (an io.Closer) of a node's request, so that a session can end
// its own wait for the daemon's next message by closing it.
type bodyKey struct{}

// identify puts the node named by the verified client certificate in the request context. The
// TLS layer has already checked the chain against the node CAs; a certificate from another
// trust domain or without a node SPIFFE ID carries no identity.
func (g *Gateway) identify(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			leaf := r.TLS.VerifiedChains[0][0]
			if id, err := pki.NodeID(leaf, g.opts.Authority.TrustDomain()); err == nil {
				if nodeID, err := uuid.Parse(id); err == nil {
					ctx := context.WithValue(r.Context(), nodeKey{}, nodeID)
					r = r.WithContext(context.WithValue(ctx, bodyKey{}, io.Closer(r.Body)))
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// nodeFrom returns the calling node, or Unauthenticated.
func nodeFrom(ctx context.Context) (uuid.UUID, error) {
	id, ok := ctx.Value(nodeKey{}).(uuid.UUID)
	if !ok {
		return uuid.Nil, apierr.Unauthenticated("this call needs the node's client certificate")
	}
	return id, nil
}

// errorLog maps errors to Connect codes in one place, as the API's guard does, and logs the
// unexpected ones. Refusals of calls without a node certificate, which anyone can cause as fast
// as they like, are counted and their log lines sampled (refuse).
type errorLog struct {
	log *slog.Logger
	g   *Gateway
}

func (e errorLog) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err != nil {
			return nil, e.convert(ctx, req.Spec().Procedure, err)
		}
		return res, nil
	}
}

func (e errorLog) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (e errorLog) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := next(ctx, conn); err != nil {
			return e.convert(ctx, conn.Spec().Procedure, err)
		}
		return nil
	}
}

func (e errorLog) convert(ctx context.Context, procedure string, err error) error {
	cerr, internal := apierr.ToConnect(err, "")
	_, known := ctx.Value(nodeKey{}).(uuid.UUID)
	switch {
	case internal:
		e.log.ErrorContext(ctx, "daemon call failed", "procedure", procedure, "err", err)
	case !known && e.g != nil:
		e.g.refuse(ctx, refusedCall, clientOf(ctx), slog.String("procedure", procedure),
			slog.String("code", cerr.Code().String()), slog.String("err", cerr.Message()))
	default:
		e.log.InfoContext(ctx, "daemon call refused", "procedure", procedure, "code", cerr.Code().String(), "err", cerr.Message())
	}
	return cerr
}
