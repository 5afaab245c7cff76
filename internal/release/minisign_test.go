package release

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func newKey(t *testing.T) (*PublicKey, *SecretKey) {
	t.Helper()
	pub, sec, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub, sec
}

func TestSignVerifyRoundTrip(t *testing.T) {
	t.Parallel()
	pub, sec := newKey(t)
	msg := []byte("abc  bcd_v1_linux_amd64\n")
	sig, err := Sign(sec, msg, "better-compute release v1")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := Sign(sec, msg, "better-compute release v1"); !bytes.Equal(again, sig) {
		t.Error("signing twice gave different bytes")
	}
	tc, err := Verify(pub, msg, sig)
	if err != nil || tc != "better-compute release v1" {
		t.Fatalf("Verify = %q, %v", tc, err)
	}

	// Keys survive encoding and parsing, as files and as bare base64 lines.
	pub2, err := ParsePublicKey(pub.Encode())
	if err != nil || pub2.String() != pub.String() || pub2.ID != pub.ID {
		t.Fatalf("ParsePublicKey(Encode) = %v, %v", pub2, err)
	}
	if k, err := ParsePublicKey([]byte(pub.String())); err != nil || !k.Key.Equal(pub.Key) {
		t.Fatalf("ParsePublicKey(String) = %v, %v", k, err)
	}
	sec2, err := ParseSecretKey(sec.Encode())
	if err != nil || !sec2.Key.Equal(sec.Key) || sec2.ID != sec.ID {
		t.Fatalf("ParseSecretKey(Encode) = %v", err)
	}
	line := strings.Split(string(sec.Encode()), "\n")[1]
	if _, err := ParseSecretKey([]byte(line + "\r\n")); err != nil {
		t.Fatalf("ParseSecretKey(base64 line): %v", err)
	}
	if _, err := Verify(pub2, msg, sig); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyRejectsTampering(t *testing.T) {
	t.Parallel()
	pub, sec := newKey(t)
	other, _ := newKey(t)
	msg := []byte("the checksums\n")
	sig, err := Sign(sec, msg, "release v1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(sig), "\n")
	replace := func(i int, s string) []byte {
		l := append([]string(nil), lines...)
		l[i] = s
		return []byte(strings.Join(l, "\n"))
	}
	flip := func(s string) string { // change one base64 character, keeping it valid base64
		b := []byte(s)
		if b[20] == 'A' {
			b[20] = 'B'
		} else {
			b[20] = 'A'
		}
		return string(b)
	}
	sameID := &PublicKey{ID: pub.ID, Key: other.Key}
	for _, tc := range []struct {
		name string
		key  *PublicKey
		msg  []byte
		sig  []byte
		want error
	}{
		{"message", pub, []byte("the checksumz\n"), sig, ErrInvalidSignature},
		{"trusted comment", pub, msg, replace(2, "trusted comment: release v2"), ErrInvalidSignature},
		{"signature", pub, msg, replace(1, flip(lines[1])), nil},
		{"global signature", pub, msg, replace(3, flip(lines[3])), ErrInvalidSignature},
		{"other key", other, msg, sig, ErrWrongKey},
		{"other key with the same id", sameID, msg, sig, ErrInvalidSignature},
		{"truncated", pub, msg, []byte(strings.Join(lines[:2], "\n")), nil},
		{"huge", pub, msg, bytes.Repeat([]byte("x"), 1<<20), nil},
	} {
		got, err := Verify(tc.key, tc.msg, tc.sig)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: Verify = %q, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	// The untrusted comment is not covered by the signature, by design.
	if _, err := Verify(pub, msg, replace(0, "untrusted comment: anything")); err != nil {
		t.Errorf("changed untrusted comment: %v", err)
	}
}

func TestKeyParsingRejectsBadInput(t *testing.T) {
	t.Parallel()
	pub, sec := newKey(t)
	secLine := strings.Split(string(sec.Encode()), "\n")[1]
	if _, err := ParseSecretKey(pub.Encode()); err == nil {
		t.Error("a public key parsed as a secret key")
	}
	if _, err := ParsePublicKey(sec.Encode()); err == nil {
		t.Error("a secret key parsed as a public key")
	}
	if _, err := ParsePublicKey(bytes.Repeat([]byte("A"), 5000)); err == nil {
		t.Error("a huge public key parsed")
	}
	if _, err := ParsePublicKey([]byte("untrusted comment: x\nnot base64!\n")); err == nil {
		t.Error("garbage parsed")
	}
	// A corrupt secret key is refused by its checksum, and no error shows the key.
	b := []byte(secLine)
	if b[100] == 'A' {
		b[100] = 'B'
	} else {
		b[100] = 'A'
	}
	_, err := ParseSecretKey(b)
	if err == nil {
		t.Fatal("a corrupt secret key parsed")
	}
	if strings.Contains(err.Error(), secLine[60:90]) {
		t.Errorf("the error shows the key: %v", err)
	}
	// Encrypted keys are refused with a hint.
	raw := mustDecode(t, secLine)
	copy(raw[2:4], kdfScrypt)
	enc := []byte(encode(raw))
	if _, err := ParseSecretKey(enc); err == nil || !strings.Contains(err.Error(), "minisign -C -W") {
		t.Errorf("encrypted key: %v", err)
	}
	// Formatting a secret key never shows it.
	for _, s := range []string{fmt.Sprint(sec), fmt.Sprintf("%v %+v %#v %s", sec, sec, sec, sec)} {
		if !strings.Contains(s, "redacted") || strings.Contains(s, fmt.Sprint([]byte(sec.Key))) || strings.Contains(s, fmt.Sprintf("%x", []byte(sec.Key[:8]))) {
			t.Errorf("formatted secret key: %s", s)
		}
	}
}

func TestSignRejectsBadComments(t *testing.T) {
	t.Parallel()
	_, sec := newKey(t)
	for _, c := range []string{"two\nlines", "cr\r", strings.Repeat("x", maxTrustedCommentBytes+1)} {
		if _, err := Sign(sec, []byte("m"), c); err == nil {
			t.Errorf("Sign accepted trusted comment %.20q", c)
		}
	}
	if _, err := Sign(nil, []byte("m"), ""); err == nil {
		t.Error("Sign without a key")
	}
}

// minisignCLI returns the path of Debian's minisign, skipping the test when it is missing.
func minisignCLI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("minisign")
	if err != nil {
		t.Skip("minisign is not installed (scripts/setup installs it)")
	}
	return p
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMinisignCLIVerifiesGo checks that minisign -V accepts what Go signs, and refuses it when
// the message changes.
func TestMinisignCLIVerifiesGo(t *testing.T) {
	t.Parallel()
	cli := minisignCLI(t)
	dir := t.TempDir()
	pub, sec := newKey(t)
	msg := []byte("e3b0  bcd_v1_linux_amd64\n")
	sig, err := Sign(sec, msg, "better-compute release v1 file:SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "minisign.pub"), pub.Encode())
	write(t, filepath.Join(dir, "m"), msg)
	write(t, filepath.Join(dir, "m.minisig"), sig)
	out := run(t, dir, cli, "-Vm", "m", "-p", "minisign.pub")
	if !strings.Contains(out, "Trusted comment: better-compute release v1 file:SHA256SUMS") {
		t.Errorf("minisign -V: %s", out)
	}
	run(t, dir, cli, "-Vm", "m", "-P", pub.String())
	write(t, filepath.Join(dir, "m"), append(msg, 'x'))
	if out, err := exec.Command(cli, "-Vm", filepath.Join(dir, "m"), "-p", filepath.Join(dir, "minisign.pub")).CombinedOutput(); err == nil {
		t.Errorf("minisign -V accepted a changed message: %s", out)
	}
	// minisign also signs with a key Go wrote.
	write(t, filepath.Join(dir, "minisign.key"), sec.Encode())
	write(t, filepath.Join(dir, "m"), msg)
	run(t, dir, cli, "-S", "-W", "-s", "minisign.key", "-m", "m", "-x", "cli.minisig", "-t", "from the CLI")
	if tc, err := Verify(pub, msg, readFile(t, filepath.Join(dir, "cli.minisig"))); err != nil || tc != "from the CLI" {
		t.Errorf("Verify(minisign -S with a Go key) = %q, %v", tc, err)
	}
}

// TestGoVerifiesMinisignCLI checks that Go reads keys made by minisign -G -W and verifies
// signatures made by minisign -S, in both its formats, and can sign with such a key.
func TestGoVerifiesMinisignCLI(t *testing.T) {
	t.Parallel()
	cli := minisignCLI(t)
	dir := t.TempDir()
	run(t, dir, cli, "-G", "-W", "-p", "k.pub", "-s", "k.key")
	pub, err := ParsePublicKey(readFile(t, filepath.Join(dir, "k.pub")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readFile(t, filepath.Join(dir, "k.pub"))), pub.ID.String()) {
		t.Errorf("key id %s is not the one minisign prints", pub.ID)
	}
	sec, err := ParseSecretKey(readFile(t, filepath.Join(dir, "k.key")))
	if err != nil {
		t.Fatal(err)
	}
	if sec.Public().String() != pub.String() {
		t.Fatal("the secret key minisign wrote does not match its public key")
	}
	msg := []byte("signed by the minisign CLI\n")
	write(t, filepath.Join(dir, "m"), msg)
	run(t, dir, cli, "-S", "-s", "k.key", "-m", "m", "-t", "cli comment")
	run(t, dir, cli, "-S", "-l", "-s", "k.key", "-m", "m", "-x", "legacy.minisig", "-t", "legacy comment")
	for file, want := range map[string]string{"m.minisig": "cli comment", "legacy.minisig": "legacy comment"} {
		sig := readFile(t, filepath.Join(dir, file))
		if tc, err := Verify(pub, msg, sig); err != nil || tc != want {
			t.Errorf("%s: Verify = %q, %v", file, tc, err)
		}
		if _, err := Verify(pub, []byte("changed"), sig); !errors.Is(err, ErrInvalidSignature) {
			t.Errorf("%s: a changed message verified: %v", file, err)
		}
	}
	// And the CLI verifies what Go signs with the CLI's key.
	sig, err := Sign(sec, msg, "go comment")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "m.minisig"), sig)
	run(t, dir, cli, "-Vm", "m", "-p", "k.pub")
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustDecode(t *testing.T, s string) []byte {
	t.Helper()
	b, err := decodeBase64([]byte(s), secretKeyBytes, "test key")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encode(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
