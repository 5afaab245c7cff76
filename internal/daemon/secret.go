package daemon

import (
	"context"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// Secret fetches the value of a secret of the node's tenant that the node's spec names. A
// secret not named, or not existing, is a NotFound error; a revoked node's is PermissionDenied.
func (a *Agent) Secret(ctx context.Context, name string) ([]byte, error) {
	a.mu.Lock()
	client := a.client
	a.mu.Unlock()
	res, err := client.Secret(ctx, &daemonv1.SecretRequest{Name: name})
	if err != nil {
		return nil, err
	}
	return res.GetValue(), nil
}
