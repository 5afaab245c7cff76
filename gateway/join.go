package gateway

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/limit/bucket"
	"github.com/better-compute/better-compute/internal/secret"
)

// service implements DaemonService.
type service struct{ g *Gateway }

// Join spends one use of a join token and creates the node with its certificate, in one
// transaction: a refused join (bad token, bad CSR, a token spent by a concurrent join, a tenant
// at its cap of nodes) creates nothing and spends nothing.
//
// Every Join first takes a token from its client address's bucket (limits.gatewayJoinRate and
// gatewayJoinBurst), before anything is looked up; one that succeeds gives it back, so the
// bucket counts refused joins and a flood of bad tokens is refused without reaching the database.
func (s *service) Join(ctx context.Context, req *daemonv1.JoinRequest) (res *daemonv1.JoinResponse, err error) {
	g := s.g
	client := clientOf(ctx)
	if client != "" {
		if ok, wait := g.admission.joinAttempts.Allow(client); !ok {
			g.refuse(ctx, refusedJoinRate, client)
			cerr := connect.NewError(connect.CodeResourceExhausted, errors.New(
				"too many refused joins from this address (limits.gatewayJoinRate, limits.gatewayJoinBurst)"))
			cerr.Meta().Set("Retry-After", strconv.Itoa(bucket.RetryAfterSeconds(wait)))
			return nil, cerr
		}
		defer func() {
			if err == nil {
				g.admission.joinAttempts.Refund(client)
			}
		}()
	}
	token, err := auth.ParseJoinToken(req.GetToken())
	if err != nil {
		return nil, apierr.Unauthenticated("token: %v", err)
	}
	if len(req.GetHostname()) > 253 {
		return nil, apierr.InvalidArgument("hostname", "must be at most 253 characters")
	}
	if !validHostname(req.GetHostname()) {
		return nil, apierr.InvalidArgument("hostname", "must be UTF-8 without control characters")
	}
	csr, err := x509.ParseCertificateRequest(req.GetCsr())
	if err != nil {
		return nil, apierr.InvalidArgument("csr", "not a DER certificate request: %v", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, apierr.InvalidArgument("csr", "signature does not match its key: %v", err)
	}
	// Check the token without a lock and sign the certificate, then create the node and spend
	// the token in one short transaction (admitJoin): the spend is conditional, so a token used
	// up meanwhile refuses the join and rolls the node back.
	t, err := db.New(g.opts.Pool).GetJoinToken(ctx, token.ID)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && !token.Matches(t.SecretHash)):
		return nil, apierr.Unauthenticated("join token %s is not valid", token.ID)
	case err != nil:
		return nil, err
	case t.RevokedAt != nil:
		return nil, apierr.Unauthenticated("join token %s was revoked", token.ID)
	case !time.Now().Before(t.ExpiresAt):
		return nil, apierr.Unauthenticated("join token %s expired at %s", token.ID, t.ExpiresAt.UTC().Format(time.RFC3339))
	case t.Uses >= t.MaxUses:
		return nil, apierr.Unauthenticated("join token %s has been used up (%d of %d)", token.ID, t.Uses, t.MaxUses)
	}
	nodeID := uuid.Must(uuid.NewV7())
	chain, notAfter, err := g.opts.Authority.IssueNodeChecked(csr, nodeID.String(), g.opts.CertTTL)
	if err != nil {
		return nil, apierr.InvalidArgument("csr", "%v", err)
	}
	if err := g.admitJoin(ctx, t, nodeID, req.GetHostname(), notAfter); err != nil {
		return nil, err
	}
	res = &daemonv1.JoinResponse{
		NodeId: nodeID.String(), CertificateChain: chain, RootCa: g.opts.Authority.RootPEM(),
		TrustDomain: g.opts.Authority.TrustDomain(), NotAfter: timestamppb.New(notAfter),
	}
	g.log.Info("node joined", "node_id", res.GetNodeId(), "join_token_id", token.ID)
	return res, nil
}

// Renew issues a fresh certificate to a node that still holds a valid one and is not revoked.
func (s *service) Renew(ctx context.Context, req *daemonv1.RenewRequest) (*daemonv1.RenewResponse, error) {
	nodeID, err := nodeFrom(ctx)
	if err != nil {
		return nil, err
	}
	g := s.g
	q := db.New(g.opts.Pool)
	node, err := q.GetNodeForGateway(ctx, nodeID)
	if err != nil {
		return nil, fmt.Errorf("renew node %s: %w", nodeID, err)
	}
	if node.RevokedAt != nil {
		return nil, apierr.PermissionDenied("node %s is revoked", nodeID)
	}
	chain, notAfter, err := g.opts.Authority.IssueNode(req.GetCsr(), nodeID.String(), g.opts.CertTTL)
	if err != nil {
		return nil, apierr.InvalidArgument("csr", "%v", err)
	}
	if err := q.RenewNodeCert(ctx, db.RenewNodeCertParams{ID: nodeID, CertNotAfter: &notAfter}); err != nil {
		return nil, fmt.Errorf("record renewal of node %s: %w", nodeID, err)
	}
	return &daemonv1.RenewResponse{CertificateChain: chain, NotAfter: timestamppb.New(notAfter)}, nil
}

// Secret hands the calling node the value of a secret of its tenant that its NodeSpec names.
// "Not named" and "no such secret" get the same NotFound, so a node cannot probe the tenant's
// secret names; a revoked node is refused.
func (s *service) Secret(ctx context.Context, req *daemonv1.SecretRequest) (*daemonv1.SecretResponse, error) {
	nodeID, err := nodeFrom(ctx)
	if err != nil {
		return nil, err
	}
	g := s.g
	if g.opts.Secrets == nil {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("this gateway cannot open node secrets (it has no deployment secret)"))
	}
	name := req.GetName()
	if !secret.ValidName(name) {
		return nil, apierr.InvalidArgument("name", "%q is not a secret name", name)
	}
	row, err := db.New(g.opts.Pool).GetSecretForNode(ctx, db.GetSecretForNodeParams{NodeID: nodeID, Name: name})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "node %s not found", nodeID)
	}
	if row.RevokedAt != nil {
		return nil, apierr.PermissionDenied("node %s is revoked", nodeID)
	}
	if row.SecretID == nil {
		return nil, apierr.NotFound("secret %q is not granted to this node", name)
	}
	value, err := g.opts.Secrets.Open(*row.SecretID, row.ValueSealed)
	if err != nil {
		return nil, err
	}
	g.log.InfoContext(ctx, "secret handed to node", "node_id", nodeID, "secret_id", *row.SecretID)
	return &daemonv1.SecretResponse{Value: value}, nil
}
