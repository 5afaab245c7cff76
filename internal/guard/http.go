package guard

import (
	"context"
	"errors"
	"net/http"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/requestid"
)

// AuthenticateHTTP admits a plain HTTP request of the API that is not a Connect call (the tunnel
// upgrade, GET {basePath}/tunnels/{ticket}) as admit admits calls: the client address's token
// bucket, the credential through the IAM bridge, the API key's bucket, and the permission. It
// returns (nil, nil) for a request without a credential; a refusal is the error a call would get
// (Unauthenticated, PermissionDenied, or ResourceExhausted with Retry-After in its metadata).
func (g *Guard) AuthenticateHTTP(ctx context.Context, r *http.Request, permission string) (*auth.Principal, error) {
	if err := g.limitAddress(g.clientKey(r.Header, connect.Peer{Addr: r.RemoteAddr})); err != nil {
		return nil, err
	}
	p, err := g.bridge.Authenticate(ctx, r.Header)
	if err != nil || p == nil {
		return nil, err
	}
	if err := g.limitKey(p); err != nil {
		return p, err
	}
	if err := g.bridge.Authorize(ctx, p, permission); err != nil {
		return p, err
	}
	return p, nil
}

// LimitAddress guards a public plain-HTTP route (the dashboard's sign-in start) as admit guards a
// public method: the client address's token bucket first, answering 429 with Retry-After when it
// is empty, so a flood never reaches the database. The request's context then carries a Call
// whose Client is the address's key (CallFrom), by the same trusted-proxy rules as calls.
func (g *Guard) LimitAddress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := &Call{RequestID: requestid.From(r.Context()), Client: g.clientKey(r.Header, connect.Peer{Addr: r.RemoteAddr})}
		if err := g.limitAddress(call.Client); err != nil {
			msg := err.Error()
			if cerr, ok := errors.AsType[*connect.Error](err); ok {
				w.Header().Set(RetryAfterHeader, cerr.Meta().Get(RetryAfterHeader))
				msg = cerr.Message()
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(msg + "\n"))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, call)))
	})
}
