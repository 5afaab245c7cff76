package guard

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/internal/auth"
)

// AuthenticateHTTP admits a plain HTTP request of the API that is not a Connect call (the tunnel
// upgrade, GET {basePath}/tunnels/{ticket}) as admit admits calls: the client address's token
// bucket, the credential through the IAM bridge, the API key's bucket, and the permission. It
// returns (nil, nil) for a request without a credential; a refusal is the error a call would get
// (Unauthenticated, PermissionDenied, or ResourceExhausted with Retry-After in its metadata).
func (g *Guard) AuthenticateHTTP(ctx context.Context, r *http.Request, permission string) (*auth.Principal, error) {
	if err := g.limitAddress(r.Header, connect.Peer{Addr: r.RemoteAddr}); err != nil {
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
