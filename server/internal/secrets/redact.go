package secrets

import (
	"google.golang.org/protobuf/proto"

	secretsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1"
	"github.com/better-compute/better-compute/internal/secret"
)

// redact returns the request with its value replaced by a keyed digest, for the admission's
// request hash: a retry with the same value still matches, and a different value under the same
// Idempotency-Key is still refused, but no one without the deployment secret can test guesses of
// the value against the stored hash.
func redact(s *secret.Sealer, req proto.Message) proto.Message {
	switch r := req.(type) {
	case *secretsv1.CreateRequest:
		return &secretsv1.CreateRequest{Name: r.GetName(), Value: s.Digest(r.GetValue())}
	case *secretsv1.UpdateRequest:
		return &secretsv1.UpdateRequest{Name: r.GetName(), Value: s.Digest(r.GetValue())}
	}
	return req
}
