package host

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/pki/cahash"
)

// ErrNoTrust is bcd join's refusal without --ca-file or --ca-cert-hash: a node never trusts the
// first gateway it meets.
var ErrNoTrust = errors.New("join needs the deployment's root CA to check the gateway: " +
	"--ca-cert-hash sha256:… (printed by joinTokens/create and `better-compute pki status`), " +
	"or --ca-file root-ca.pem (written by `better-compute pki export-root`)")

// MaxCACertHashes bounds --ca-cert-hash: a pin for the root and one for its successor is what a
// rotation needs.
const MaxCACertHashes = 8

// parsePins reads --ca-cert-hash values.
func parsePins(in []string) ([]string, error) {
	if len(in) > MaxCACertHashes {
		return nil, fmt.Errorf("--ca-cert-hash: at most %d, got %d", MaxCACertHashes, len(in))
	}
	pins := make([]string, 0, len(in))
	for _, s := range in {
		p, err := cahash.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert-hash: %w", err)
		}
		pins = append(pins, p)
	}
	return pins, nil
}

// joinRoot is the root CA a join verifies the gateway with: caFile's (which must match a pin
// when there are pins), else the root the gateway shows that matches a pin.
func joinRoot(ctx context.Context, caFile string, pins []string, d daemon.Dialer) ([]byte, error) {
	if caFile == "" {
		if len(pins) == 0 {
			return nil, ErrNoTrust
		}
		root, err := d.FetchRoot(ctx, pins)
		if err != nil {
			return nil, fmt.Errorf("%w; not joined, nothing written", err)
		}
		return root, nil
	}
	rootPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(rootPEM) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate in it", caFile)
	}
	if len(pins) > 0 {
		if err := checkAnswerRoot(rootPEM, pins); err != nil {
			return nil, fmt.Errorf("CA file %s: %w", caFile, err)
		}
	}
	return rootPEM, nil
}

// checkAnswerRoot checks that rootPEM (the root the join's answer names, which bcd run will
// trust) matches one of pins, when there are any.
func checkAnswerRoot(rootPEM []byte, pins []string) error {
	if len(pins) == 0 {
		return nil
	}
	cert, err := cahash.FirstCert(rootPEM)
	if err != nil {
		return fmt.Errorf("the root CA: %w", err)
	}
	if !cahash.Match(cert, pins) {
		return fmt.Errorf("%w: the root CA %q has %s", daemon.ErrRootNotPinned, cert.Subject.CommonName, cahash.Of(cert))
	}
	return nil
}
