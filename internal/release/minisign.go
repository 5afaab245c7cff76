// Package release cuts and checks Better Compute releases: minisign-format Ed25519 keys and
// signatures (readable and verifiable by the minisign CLI), the reproducible build of the
// binaries, and the manifest that describes a release to the control plane and to bcd.
//
// The formats follow https://jedisct1.github.io/minisign/:
//
//	public key:  base64("Ed" || key id (8) || Ed25519 public key (32))
//	secret key:  base64("Ed" || KDF "\0\0" || "B2" || salt (32) || opslimit (8) || memlimit (8) ||
//	                    key id (8) || Ed25519 secret key (64) || BLAKE2b-256 checksum (32))
//	signature:   base64("ED" || key id (8) || Ed25519(BLAKE2b-512(message)))
//	             then "trusted comment: TEXT" and base64(Ed25519(signature || TEXT))
//
// Secret keys are written unencrypted (KDF algorithm bytes zero, as `minisign -G -W` does): the
// operator protects the file (0600) or the environment variable that holds it. Keys encrypted
// with a password (scrypt) are refused with a hint to remove the password with `minisign -C -W`.
package release

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/blake2b"
)

// Limits on what the parsers accept, so a hostile or corrupt file cannot make them allocate
// without bound. They match minisign's own (COMMENTMAXBYTES, TRUSTEDCOMMENTMAXBYTES).
const (
	maxCommentBytes        = 1024
	maxTrustedCommentBytes = 8192
	maxKeyFileBytes        = 4096
	maxSignatureFileBytes  = 2*maxCommentBytes + maxTrustedCommentBytes + 512
)

const (
	untrustedPrefix = "untrusted comment: "
	trustedPrefix   = "trusted comment: "
	keyIDBytes      = 8
	algEd           = "Ed" // key algorithm, and the legacy signature of the message itself
	algEdHashed     = "ED" // signature of the BLAKE2b-512 hash of the message (minisign's default)
	algChecksum     = "B2"
	kdfScrypt       = "Sc"
	kdfNone         = "\x00\x00"
	publicKeyBytes  = 2 + keyIDBytes + ed25519.PublicKeySize                            // 42
	secretKeyBytes  = 2 + 2 + 2 + 32 + 8 + 8 + keyIDBytes + ed25519.PrivateKeySize + 32 // 158
	signatureBytes  = 2 + keyIDBytes + ed25519.SignatureSize                            // 74
)

// ErrInvalidSignature reports a signature that does not verify: the message, the trusted
// comment or the signature itself was changed, or it was made by another key with the same id.
var ErrInvalidSignature = errors.New("release: invalid signature")

// ErrWrongKey reports a signature made by a key other than the one it is verified with.
var ErrWrongKey = errors.New("release: signed by another key")

// KeyID identifies a key pair; signatures carry it so a verifier can tell "wrong key" from
// "tampered". minisign prints it as upper-case hex digits of its little-endian value.
type KeyID [keyIDBytes]byte

// String formats the id as minisign does ("minisign public key ADA35C7798A552DE").
func (id KeyID) String() string {
	// As minisign prints it (%PRIX64): without leading zeros, so the two name a key alike.
	return fmt.Sprintf("%X", binary.LittleEndian.Uint64(id[:]))
}

// PublicKey verifies release signatures. It is safe to publish and to log.
type PublicKey struct {
	ID  KeyID
	Key ed25519.PublicKey
}

// SecretKey signs releases. Its String and GoString never show the key, so logging one by
// mistake leaks nothing; only Encode reveals it.
type SecretKey struct {
	ID  KeyID
	Key ed25519.PrivateKey
}

// GenerateKey makes a new key pair with a random key id, reading randomness from r
// (crypto/rand when nil).
func GenerateKey(r io.Reader) (*PublicKey, *SecretKey, error) {
	if r == nil {
		r = rand.Reader
	}
	var id KeyID
	if _, err := io.ReadFull(r, id[:]); err != nil {
		return nil, nil, fmt.Errorf("release: generate key id: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(r)
	if err != nil {
		return nil, nil, fmt.Errorf("release: generate key: %w", err)
	}
	return &PublicKey{ID: id, Key: pub}, &SecretKey{ID: id, Key: priv}, nil
}

// Public returns the public half of the key pair.
func (k *SecretKey) Public() *PublicKey {
	return &PublicKey{ID: k.ID, Key: k.Key.Public().(ed25519.PublicKey)}
}

// String names the key by id only.
func (k *SecretKey) String() string { return "release.SecretKey(" + k.ID.String() + ", redacted)" }

// GoString names the key by id only, so %#v does not print it either.
func (k *SecretKey) GoString() string { return k.String() }

// String is the key in minisign's one-line form, what `minisign -V -P KEY` takes.
func (k *PublicKey) String() string {
	b := make([]byte, 0, publicKeyBytes)
	b = append(b, algEd...)
	b = append(b, k.ID[:]...)
	b = append(b, k.Key...)
	return base64.StdEncoding.EncodeToString(b)
}

// Encode is the content of a minisign.pub file.
func (k *PublicKey) Encode() []byte {
	return []byte(untrustedPrefix + "minisign public key " + k.ID.String() + "\n" + k.String() + "\n")
}

// Encode is the content of an unencrypted minisign.key file. It holds the secret: write it only
// to a file only its owner can read.
func (k *SecretKey) Encode() []byte {
	b := make([]byte, 0, secretKeyBytes)
	b = append(b, algEd...)
	b = append(b, kdfNone...)
	b = append(b, algChecksum...)
	b = append(b, make([]byte, 32+8+8)...) // salt, opslimit, memlimit: unused without a KDF
	b = append(b, k.ID[:]...)
	b = append(b, k.Key...)
	sum := secretKeyChecksum(k.ID, k.Key)
	b = append(b, sum[:]...)
	return []byte(untrustedPrefix + "minisign secret key " + k.ID.String() + " (unencrypted)\n" +
		base64.StdEncoding.EncodeToString(b) + "\n")
}

// secretKeyChecksum is minisign's BLAKE2b-256 over the algorithm, the key id and the key.
func secretKeyChecksum(id KeyID, key ed25519.PrivateKey) [32]byte {
	h, _ := blake2b.New256(nil) // only fails for a key longer than 64 bytes
	h.Write([]byte(algEd))
	h.Write(id[:])
	h.Write(key)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// keyLine finds the base64 line of a key file: the line after the untrusted comment, or the
// only line when the input is the bare base64 form.
func keyLine(data []byte, what string) ([]byte, error) {
	if len(data) > maxKeyFileBytes {
		return nil, fmt.Errorf("release: %s is %d bytes, more than %d", what, len(data), maxKeyFileBytes)
	}
	lines := splitLines(data)
	switch {
	case len(lines) == 1 && !strings.HasPrefix(lines[0], untrustedPrefix):
		return []byte(lines[0]), nil
	case len(lines) == 2 && strings.HasPrefix(lines[0], untrustedPrefix):
		return []byte(lines[1]), nil
	}
	return nil, fmt.Errorf("release: %s: want an %q line then a base64 line, or the base64 line alone", what, untrustedPrefix)
}

// splitLines splits on newlines, accepting CRLF and a missing final newline and dropping
// trailing blank lines.
func splitLines(data []byte) []string {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func decodeBase64(line []byte, want int, what string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(line)))
	if err != nil {
		return nil, fmt.Errorf("release: %s: %w", what, err)
	}
	if len(b) != want {
		return nil, fmt.Errorf("release: %s is %d bytes, want %d", what, len(b), want)
	}
	return b, nil
}

// ParsePublicKey reads a public key: a minisign.pub file, or its base64 line alone.
func ParsePublicKey(data []byte) (*PublicKey, error) {
	line, err := keyLine(data, "public key")
	if err != nil {
		return nil, err
	}
	b, err := decodeBase64(line, publicKeyBytes, "public key")
	if err != nil {
		return nil, err
	}
	if string(b[:2]) != algEd {
		return nil, fmt.Errorf("release: public key algorithm %q, want %q", b[:2], algEd)
	}
	k := &PublicKey{Key: ed25519.PublicKey(bytes.Clone(b[2+keyIDBytes:]))}
	copy(k.ID[:], b[2:])
	return k, nil
}

// ParseSecretKey reads an unencrypted secret key: a minisign.key file (as written by Encode or
// `minisign -G -W`), or its base64 line alone. Errors never include the key's bytes.
func ParseSecretKey(data []byte) (*SecretKey, error) {
	line, err := keyLine(data, "secret key")
	if err != nil {
		return nil, err
	}
	b, err := decodeBase64(line, secretKeyBytes, "secret key")
	if err != nil {
		return nil, err
	}
	if string(b[:2]) != algEd {
		return nil, fmt.Errorf("release: secret key algorithm %q, want %q", b[:2], algEd)
	}
	switch string(b[2:4]) {
	case kdfNone:
	case kdfScrypt:
		return nil, errors.New("release: the secret key is encrypted with a password, which is not supported; remove the password with `minisign -C -W -s FILE`")
	default:
		return nil, fmt.Errorf("release: secret key KDF %q is not supported", b[2:4])
	}
	if string(b[4:6]) != algChecksum {
		return nil, fmt.Errorf("release: secret key checksum algorithm %q, want %q", b[4:6], algChecksum)
	}
	rest := b[6+32+8+8:]
	k := &SecretKey{Key: ed25519.PrivateKey(bytes.Clone(rest[keyIDBytes : keyIDBytes+ed25519.PrivateKeySize]))}
	copy(k.ID[:], rest)
	chk := rest[keyIDBytes+ed25519.PrivateKeySize:]
	// minisign 0.11 leaves the checksum zero in unencrypted keys; when one is present it must match.
	if sum := secretKeyChecksum(k.ID, k.Key); !bytes.Equal(chk, make([]byte, 32)) && subtle.ConstantTimeCompare(chk, sum[:]) != 1 {
		return nil, errors.New("release: secret key checksum mismatch: the file is corrupt")
	}
	// An Ed25519 secret key is seed || public key: the halves must agree.
	if !ed25519.NewKeyFromSeed(k.Key.Seed()).Equal(k.Key) {
		return nil, errors.New("release: secret key is inconsistent: the file is corrupt")
	}
	return k, nil
}

// Sign signs message in minisign's default (prehashed, "ED") format with a trusted comment, and
// returns the content of a .minisig file. Ed25519 is deterministic, so the same key, message and
// comment always give the same bytes. The trusted comment is one line of at most 8192 bytes.
func Sign(key *SecretKey, message []byte, trustedComment string) ([]byte, error) {
	if key == nil || len(key.Key) != ed25519.PrivateKeySize {
		return nil, errors.New("release: sign: no secret key")
	}
	if err := checkComment(trustedComment, maxTrustedCommentBytes, "trusted comment"); err != nil {
		return nil, err
	}
	hash := blake2b.Sum512(message)
	sig := make([]byte, 0, signatureBytes)
	sig = append(sig, algEdHashed...)
	sig = append(sig, key.ID[:]...)
	sig = append(sig, ed25519.Sign(key.Key, hash[:])...)
	global := ed25519.Sign(key.Key, append(bytes.Clone(sig[2+keyIDBytes:]), trustedComment...))
	var out bytes.Buffer
	out.WriteString(untrustedPrefix + "signature from better-compute release key " + key.ID.String() + "\n")
	out.WriteString(base64.StdEncoding.EncodeToString(sig) + "\n")
	out.WriteString(trustedPrefix + trustedComment + "\n")
	out.WriteString(base64.StdEncoding.EncodeToString(global) + "\n")
	return out.Bytes(), nil
}

func checkComment(c string, limit int, what string) error {
	if len(c) > limit {
		return fmt.Errorf("release: %s is %d bytes, more than %d", what, len(c), limit)
	}
	if strings.ContainsAny(c, "\r\n\x00") {
		return fmt.Errorf("release: %s must be one line", what)
	}
	return nil
}

// Verify checks a .minisig signature over message with key, in either the prehashed ("ED") or
// the legacy ("Ed") format, and returns its trusted comment, which is authentic only when err is
// nil. A signature by another key fails with ErrWrongKey, any other mismatch with
// ErrInvalidSignature.
func Verify(key *PublicKey, message, sig []byte) (trustedComment string, err error) {
	if key == nil || len(key.Key) != ed25519.PublicKeySize {
		return "", errors.New("release: verify: no public key")
	}
	if len(sig) > maxSignatureFileBytes {
		return "", fmt.Errorf("release: signature file is %d bytes, more than %d", len(sig), maxSignatureFileBytes)
	}
	lines := splitLines(sig)
	if len(lines) != 4 || !strings.HasPrefix(lines[0], untrustedPrefix) || !strings.HasPrefix(lines[2], trustedPrefix) {
		return "", errors.New("release: signature file: want 4 lines: untrusted comment, signature, trusted comment, global signature")
	}
	trustedComment = strings.TrimPrefix(lines[2], trustedPrefix)
	if err := checkComment(trustedComment, maxTrustedCommentBytes, "trusted comment"); err != nil {
		return "", err
	}
	s, err := decodeBase64([]byte(lines[1]), signatureBytes, "signature")
	if err != nil {
		return "", err
	}
	global, err := decodeBase64([]byte(lines[3]), ed25519.SignatureSize, "global signature")
	if err != nil {
		return "", err
	}
	var id KeyID
	copy(id[:], s[2:])
	if id != key.ID {
		return "", fmt.Errorf("%w: key %s, not %s", ErrWrongKey, id, key.ID)
	}
	signed := message
	switch string(s[:2]) {
	case algEdHashed:
		h := blake2b.Sum512(message)
		signed = h[:]
	case algEd:
	default:
		return "", fmt.Errorf("release: signature algorithm %q is not supported", s[:2])
	}
	if !ed25519.Verify(key.Key, signed, s[2+keyIDBytes:]) {
		return "", fmt.Errorf("%w: the message does not match", ErrInvalidSignature)
	}
	if !ed25519.Verify(key.Key, append(bytes.Clone(s[2+keyIDBytes:]), trustedComment...), global) {
		return "", fmt.Errorf("%w: the trusted comment does not match", ErrInvalidSignature)
	}
	return trustedComment, nil
}
