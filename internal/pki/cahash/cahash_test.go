package cahash_test

import (
	"os"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/pki/cahash"
)

// knownPin is testdata/ca.pem's pin as OpenSSL computes it, the way kubeadm's documentation
// does: openssl x509 -pubkey -noout -in ca.pem | openssl pkey -pubin -outform der | openssl dgst -sha256 -hex
const knownPin = "sha256:c26e26a8b7f0eeca23c5a8a1bdd3ada4d1a9be6ab45fa359134e0838be8cefba"

func TestOfKnownCertificate(t *testing.T) {
	t.Parallel()
	pemData, err := os.ReadFile("testdata/ca.pem")
	if err != nil {
		t.Fatal(err)
	}
	got, err := cahash.OfPEM(pemData)
	if err != nil {
		t.Fatal(err)
	}
	if got != knownPin {
		t.Fatalf("OfPEM = %s, want %s", got, knownPin)
	}
	cert, err := cahash.FirstCert(append([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), pemData...))
	if err != nil {
		t.Fatal(err)
	}
	if !cahash.Match(cert, []string{"sha256:" + strings.Repeat("0", 64), knownPin}) || cahash.Match(cert, []string{"sha256:" + strings.Repeat("0", 64)}) {
		t.Error("Match does not find the pin among others, or finds one that is not there")
	}
	if _, err := cahash.OfPEM([]byte("not PEM")); err == nil {
		t.Error("OfPEM of no certificate: no error")
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	if got, err := cahash.Parse(" SHA256:C26E" + knownPin[len("sha256:c26e"):] + "\n"); err == nil || got != "" {
		// The function name is case-sensitive, as kubeadm's is.
		t.Errorf("Parse of an upper-case prefix = %q, %v", got, err)
	}
	if got, err := cahash.Parse("sha256:" + strings.ToUpper(knownPin[len("sha256:"):]) + "\n"); err != nil || got != knownPin {
		t.Errorf("Parse of upper-case hex = %q, %v; want %s", got, err, knownPin)
	}
	for _, bad := range []string{"", knownPin[len("sha256:"):], "sha256:", "sha256:abc", knownPin + "00", "sha1:" + knownPin[len("sha256:"):], "sha256:" + strings.Repeat("g", 64)} {
		if got, err := cahash.Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", bad, got)
		}
	}
}
