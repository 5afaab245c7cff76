// Package cahash is the pin a node joins with when it has no CA file yet: the SHA-256 of a CA
// certificate's SubjectPublicKeyInfo, written "sha256:<64 hex digits>", the very form of
// kubeadm's --discovery-token-ca-cert-hash. It hashes the public key rather than the whole
// certificate, so a root re-signed with the same key (a new expiry) keeps its pin. It is a leaf
// package so that bcd (internal/daemon) checks pins without importing the PKI's database code.
package cahash

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// Prefix names the hash function of a pin.
const Prefix = "sha256:"

// Of is cert's pin: "sha256:" and the lower-case hex SHA-256 of its SubjectPublicKeyInfo.
func Of(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return Prefix + hex.EncodeToString(sum[:])
}

// OfPEM is the pin of the first certificate of pemData.
func OfPEM(pemData []byte) (string, error) {
	cert, err := FirstCert(pemData)
	if err != nil {
		return "", err
	}
	return Of(cert), nil
}

// FirstCert parses the first CERTIFICATE block of pemData.
func FirstCert(pemData []byte) (*x509.Certificate, error) {
	for {
		var block *pem.Block
		block, pemData = pem.Decode(pemData)
		if block == nil {
			return nil, errors.New("no PEM certificate")
		}
		if block.Type == "CERTIFICATE" {
			cert, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse the certificate: %w", err)
			}
			return cert, nil
		}
	}
}

// Parse checks a pin as a user typed it and returns it in the form Of writes (hex folded to
// lower case). Only sha256 is accepted: a pin must name its function, so that a bare hex
// string of another length is never compared by mistake.
func Parse(s string) (string, error) {
	hexPart, ok := strings.CutPrefix(strings.TrimSpace(s), Prefix)
	if !ok {
		return "", fmt.Errorf("CA certificate hash %q: want sha256:<64 hex digits>", s)
	}
	b, err := hex.DecodeString(hexPart)
	if err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("CA certificate hash %q: want sha256:<64 hex digits>", s)
	}
	return Prefix + hex.EncodeToString(b), nil
}

// Match reports whether cert's pin is one of pins (each in Parse's form).
func Match(cert *x509.Certificate, pins []string) bool {
	h := Of(cert)
	for _, p := range pins {
		if p == h {
			return true
		}
	}
	return false
}
