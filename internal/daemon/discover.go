package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/better-compute/better-compute/internal/pki/cahash"
	"github.com/better-compute/better-compute/internal/pki/spiffeid"
)

// ErrRootNotPinned is the error of a discovery whose gateway showed no root CA matching the
// pins (`bcd join --ca-cert-hash`): another server, a proxy that inspects TLS, or another
// deployment. Nothing was sent to it.
var ErrRootNotPinned = errors.New("no root CA matching --ca-cert-hash")

// FetchRoot finds the deployment's root CA without trusting anything yet, as kubeadm's
// --discovery-token-ca-cert-hash does: one TLS handshake with the gateway, by the Dialer's
// transport (direct, or inside the WebSocket through the environment's proxy), in which the
// gateway sends its certificate and the root after it (pki.Bundle.IssueGateway). The
// handshake passes only when a certificate of the chain is a self-signed CA whose public key's
// SHA-256 is one of pins (cahash.Parse's form), the gateway's certificate verifies against it
// for the name dialled, and carries a gateway's SPIFFE ID. The connection is closed before a
// byte of HTTP is sent, so a join token never reaches a server that fails the check. It
// returns that root as PEM, for the join and for `bcd run`.
func (d Dialer) FetchRoot(ctx context.Context, pins []string) ([]byte, error) {
	if len(pins) == 0 {
		return nil, errors.New("fetch the root CA: no pin")
	}
	var root *x509.Certificate
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13, ServerName: d.ServerName, NextProtos: []string{"h2"},
		// The chain is verified in VerifyConnection, against the pinned root it carries.
		InsecureSkipVerify: true, //nolint:gosec // verified against the pin below
		VerifyConnection: func(cs tls.ConnectionState) error {
			r, err := pinnedRoot(cs, pins)
			if err != nil {
				return fmt.Errorf("gateway %s: %w", d.Gateway, err)
			}
			if _, err := spiffeid.GatewayOf(cs.PeerCertificates[0], ""); err != nil {
				return fmt.Errorf("gateway %s refused: %w", d.Gateway, err)
			}
			root = r
			return nil
		},
	}
	d.pins = pins
	conn, err := d.dialTLS(cfg, nil, d.DialContext)(ctx, "tcp", d.Gateway)
	if err != nil {
		return nil, fmt.Errorf("fetch the root CA from %s: %w", d.Gateway, err)
	}
	_ = conn.Close()
	if root == nil {
		return nil, fmt.Errorf("fetch the root CA from %s: %w", d.Gateway, ErrRootNotPinned)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.Raw}), nil
}

// pinnedRoot is the certificate of the peer's chain that is a self-signed CA matching one of
// pins, once the leaf verifies against it (with the chain's other certificates as
// intermediates) for the name the handshake was made for, as a server.
func pinnedRoot(cs tls.ConnectionState, pins []string) (*x509.Certificate, error) {
	if len(cs.PeerCertificates) == 0 {
		return nil, fmt.Errorf("%w: no certificate", ErrRootNotPinned)
	}
	var root *x509.Certificate
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		if root == nil && c.IsCA && cahash.Match(c, pins) && c.CheckSignatureFrom(c) == nil {
			root = c
			continue
		}
		inter.AddCert(c)
	}
	if root == nil {
		got := make([]string, 0, len(cs.PeerCertificates))
		for _, c := range cs.PeerCertificates {
			got = append(got, cahash.Of(c))
		}
		return nil, fmt.Errorf("%w: the server's chain has %v", ErrRootNotPinned, got)
	}
	roots := x509.NewCertPool()
	roots.AddCert(root)
	if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, DNSName: cs.ServerName, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil, fmt.Errorf("%w: the certificate does not verify against the pinned root: %w", ErrRootNotPinned, err)
	}
	return root, nil
}

// outerPinned verifies the WebSocket's outer TLS during FetchRoot, when the deployment's root
// is not known yet: the system's roots, else a root in the chain that matches pins (a listener
// serving the gateway's own certificate).
func outerPinned(cfg *tls.Config, sys *x509.CertPool, pins []string) *tls.Config {
	cfg = cfg.Clone()
	cfg.InsecureSkipVerify = true //nolint:gosec // verified below, against the system's roots or the pin
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the WebSocket's server sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		if _, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: sys, Intermediates: inter, DNSName: cs.ServerName}); err == nil {
			return nil
		}
		_, err := pinnedRoot(cs, pins)
		return err
	}
	return cfg
}
