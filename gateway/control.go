package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/client/tunnel"
	gatewayv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1/gatewayv1connect"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/limit"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// The internal control API lets the API accelerate a gateway right after a commit: poke it to
// dispatch a node's new commands now, or end a revoked node's session now. It is an accelerator
// only: without it the gateway's loops converge within a second or two. Its contract is
// proto/bettercompute/gateway/v1/control.proto: the Connect service GatewayControlService (Poke,
// Revoke), served over HTTPS with mutual TLS from the internal CA, and beside it the tunnels'
// raw HTTP/2 route, on which the API streams each tunnel to the gateway holding the node's
// session (POST tunnelhop.ControlPath, serveTunnel). Every route answers internal identities only
// (internalOnly).

// InternalAuthority issues the control API's certificates (*pki.Bundle provides it).
type InternalAuthority interface {
	TrustDomain() string
	IssueInternal(name string, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error)
	InternalCAPool() *x509.CertPool
}

// controlBodyBytes bounds a control request message (and, with its framing, the body that
// carries it): maxControlNodes ids fit in either codec, proto or JSON.
const controlBodyBytes = 1 << 20

// maxControlNodes bounds the node ids of one Poke or Revoke, as control.proto promises; the
// Notifier splits larger sets into several calls. An id takes 38 bytes in protobuf (36 and its
// tag and length) and 39 in JSON, so 20,000 take at most 780 KB, within controlBodyBytes; and a
// gateway holds at most some twenty thousand sessions (limit.DefaultGatewaySessions), so one
// poke round rarely needs more than one call per gateway.
const maxControlNodes = 20_000

// maxControlFanOuts bounds the fan-out ids of one Poke, as control.proto promises.
const maxControlFanOuts = 1000

// ControlHandler serves the control API's routes, every one to internal identities of
// trustDomain only: the Connect service GatewayControlService, its messages bounded to
// controlBodyBytes, and the tunnel route (serveTunnel).
func (g *Gateway) ControlHandler(trustDomain string) http.Handler {
	mux := http.NewServeMux()
	path, h := gatewayv1connect.NewGatewayControlServiceHandler(&controlService{g: g},
		append(limit.HandlerOptions(controlBodyBytes), connect.WithInterceptors(controlErrors(g.log)))...)
	mux.Handle(path, limit.Body(controlBodyBytes, h))
	mux.HandleFunc("POST "+tunnelhop.ControlPath, g.serveTunnel)
	return internalOnly(trustDomain, mux)
}

// internalOnly serves next to callers whose verified client certificate is an internal identity
// of trustDomain (spiffe://<trustDomain>/internal/<name>), and refuses every other request,
// whatever its route: without a verified certificate as unauthenticated (401), with another
// identity as permission denied (403). A refusal is written in the caller's protocol when it
// speaks Connect, gRPC or gRPC-Web (so its client reads the code), else as text.
func internalOnly(trustDomain string, next http.Handler) http.Handler {
	errs := connect.NewErrorWriter()
	refuse := func(w http.ResponseWriter, r *http.Request, code connect.Code, status int, msg string) {
		if errs.IsSupported(r) {
			_ = errs.Write(w, r, connect.NewError(code, errors.New(msg)))
			return
		}
		http.Error(w, msg, status)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			refuse(w, r, connect.CodeUnauthenticated, http.StatusUnauthorized, "client certificate required")
			return
		}
		if _, err := pki.InternalName(r.TLS.VerifiedChains[0][0], trustDomain); err != nil {
			refuse(w, r, connect.CodePermissionDenied, http.StatusForbidden, "not an internal identity")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// controlService implements GatewayControlService on a gateway.
type controlService struct {
	g *Gateway
}

// Poke takes the nodes and the fan-outs into the next dispatch round, which it wakes
// (Gateway.Poke, Gateway.PokeFanOuts).
func (s *controlService) Poke(_ context.Context, req *gatewayv1.PokeRequest) (*gatewayv1.PokeResponse, error) {
	ids, err := controlNodes(req.GetNodeIds())
	if err != nil {
		return nil, err
	}
	if len(req.GetFanOutIds()) > maxControlFanOuts {
		return nil, apierr.InvalidArgument("fan_out_ids", "at most %d ids in one call, got %d", maxControlFanOuts, len(req.GetFanOutIds()))
	}
	fanOuts := make([]uuid.UUID, len(req.GetFanOutIds()))
	for i, s := range req.GetFanOutIds() {
		if fanOuts[i], err = apierr.ParseID(fmt.Sprintf("fan_out_ids[%d]", i), s); err != nil {
			return nil, err
		}
	}
	s.g.Poke(ids...)
	s.g.PokeFanOuts(fanOuts...)
	return &gatewayv1.PokeResponse{}, nil
}

// Revoke ends the nodes' sessions here (Gateway.Revoke).
func (s *controlService) Revoke(_ context.Context, req *gatewayv1.RevokeRequest) (*gatewayv1.RevokeResponse, error) {
	ids, err := controlNodes(req.GetNodeIds())
	if err != nil {
		return nil, err
	}
	s.g.Revoke(ids...)
	return &gatewayv1.RevokeResponse{}, nil
}

// controlNodes parses a control request's node ids (the field node_ids): at most
// maxControlNodes, each a UUID. A bad one is InvalidArgument naming it, node_ids[i].
func controlNodes(ids []string) ([]uuid.UUID, error) {
	if len(ids) > maxControlNodes {
		return nil, apierr.InvalidArgument("node_ids", "at most %d ids in one call, got %d", maxControlNodes, len(ids))
	}
	out := make([]uuid.UUID, len(ids))
	for i, s := range ids {
		id, err := apierr.ParseID(fmt.Sprintf("node_ids[%d]", i), s)
		if err != nil {
			return nil, err
		}
		out[i] = id
	}
	return out, nil
}

// controlErrors turns the control service's errors into Connect errors in one place
// (apierr.ToConnect, so a bad field travels as a field violation too) and logs the unexpected
// ones.
func controlErrors(log *slog.Logger) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			res, err := next(ctx, req)
			if err == nil {
				return res, nil
			}
			cerr, internal := apierr.ToConnect(err, "")
			if internal {
				log.ErrorContext(ctx, "control call failed", "procedure", req.Spec().Procedure, "err", err)
			} else {
				log.InfoContext(ctx, "control call refused", "procedure", req.Spec().Procedure, "code", cerr.Code().String(), "err", cerr.Message())
			}
			return nil, cerr
		}
	}
}

// ServeControl serves the control API on ln until ctx ends, with a certificate for name from
// the internal CA.
func (g *Gateway) ServeControl(ctx context.Context, ln net.Listener, ia InternalAuthority, host string) error {
	cert, err := internalCertificate(ia, "gateway-"+g.opts.ID, host)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler: g.ControlHandler(ia.TrustDomain()),
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ia.InternalCAPool(),
		},
		// Every route but the tunnels' is a small unary call: bound its headers, its body
		// (ControlHandler) and the time it may take to arrive. A tunnel lifts the read timeout
		// for its own stream (serveTunnel); pings find a dead API, and the receive windows are
		// the tunnels' (tunnelhop.StreamWindow, ConnWindow).
		ReadHeaderTimeout: min(5*time.Second, g.opts.Limits.ReadHeaderTimeout),
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       g.opts.Limits.IdleTimeout,
		MaxHeaderBytes:    g.opts.Limits.HeaderBytes,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout:               30 * time.Second,
			PingTimeout:                   15 * time.Second,
			MaxReceiveBufferPerStream:     tunnelhop.StreamWindow,
			MaxReceiveBufferPerConnection: tunnelhop.ConnWindow,
			MaxReadFrameSize:              tunnelhop.MaxFrameSize,
		},
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err = <-errc:
	case <-ctx.Done():
		// Open tunnels would hold Shutdown: end them first, as going away.
		g.closeTunnels(tunnel.CodeGoingAway, "the gateway is shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("gateway control API: %w", err)
	}
	return nil
}

func internalCertificate(ia InternalAuthority, name, host string) (tls.Certificate, error) {
	var dns []string
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = append(ips, ip)
	} else if host != "" {
		dns = append(dns, host)
	}
	certPEM, keyPEM, err := ia.IssueInternal(name, dns, ips)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issue internal certificate for %s: %w", name, err)
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}
