package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/tunnel"
)

// The internal control API lets the API accelerate a gateway right after a commit: poke it to
// dispatch a node's new commands now, or end a revoked node's session now. It is an accelerator
// only: without it the gateway's loops converge within a second or two. It speaks JSON over
// HTTPS with mutual TLS from the internal CA, and accepts only internal identities. It also
// carries tunnels: the API streams each one to the gateway holding the node's session (POST
// tunnel.ControlPath, serveTunnel).
const (
	controlPoke   = "/internal/v1/poke"
	controlRevoke = "/internal/v1/revoke"
)

// InternalAuthority issues the control API's certificates (*pki.Bundle provides it).
type InternalAuthority interface {
	TrustDomain() string
	IssueInternal(name string, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error)
	InternalCAPool() *x509.CertPool
}

// controlBodyBytes bounds a control request: some twenty thousand node ids, more than one
// commit pokes.
const controlBodyBytes = 1 << 20

type controlRequest struct {
	NodeIDs []uuid.UUID `json:"nodeIds"`
}

// ControlHandler serves the control API's routes, to internal identities only.
func (g *Gateway) ControlHandler(trustDomain string) http.Handler {
	mux := http.NewServeMux()
	internal := func(path string, h http.HandlerFunc) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
				http.Error(w, "client certificate required", http.StatusUnauthorized)
				return
			}
			if _, err := pki.InternalName(r.TLS.VerifiedChains[0][0], trustDomain); err != nil {
				http.Error(w, "not an internal identity", http.StatusForbidden)
				return
			}
			h(w, r)
		})
	}
	handle := func(path string, act func(...uuid.UUID)) {
		internal(path, func(w http.ResponseWriter, r *http.Request) {
			var req controlRequest
			if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, controlBodyBytes)).Decode(&req); err != nil {
				if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
					http.Error(w, fmt.Sprintf("body: larger than %d bytes", controlBodyBytes), http.StatusRequestEntityTooLarge)
					return
				}
				http.Error(w, "body: want {\"nodeIds\": [...]}", http.StatusBadRequest)
				return
			}
			act(req.NodeIDs...)
			w.WriteHeader(http.StatusNoContent)
		})
	}
	handle(controlPoke, g.Poke)
	handle(controlRevoke, g.Revoke)
	internal(tunnel.ControlPath, g.serveTunnel)
	return mux
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
		// the tunnels' (tunnel.StreamWindow, ConnWindow).
		ReadHeaderTimeout: min(5*time.Second, g.opts.Limits.ReadHeaderTimeout),
		ReadTimeout:       10 * time.Second,
		IdleTimeout:       g.opts.Limits.IdleTimeout,
		MaxHeaderBytes:    g.opts.Limits.HeaderBytes,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout:               30 * time.Second,
			PingTimeout:                   15 * time.Second,
			MaxReceiveBufferPerStream:     tunnel.StreamWindow,
			MaxReceiveBufferPerConnection: tunnel.ConnWindow,
			MaxReadFrameSize:              tunnel.MaxFrameSize,
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
