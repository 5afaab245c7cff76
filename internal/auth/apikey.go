package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"strings"
)

// Prefixes of the two kinds of bearer secret, so secret scanners can recognise a leaked one.
const (
	// KeyPrefix starts every API key.
	KeyPrefix = "bck_"
	// JoinTokenPrefix starts every join token.
	JoinTokenPrefix = "bcj_"
)

// A key is "<prefix><id>_<secret>": the id (16 characters) finds the key's row and may be
// shown and logged; the secret (32 characters, 160 random bits) is shown once and stored only
// as its SHA-256. A slow password hash is not needed: the secret is random, not chosen.
const (
	keyIDLen     = 16
	keySecretLen = 32
)

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Key is a parsed API key or join token: both are "<prefix><id>_<secret>".
type Key struct {
	Prefix string
	ID     string
	Secret string
}

// NewKey mints a random API key.
func NewKey() Key { return newKey(KeyPrefix) }

// NewJoinToken mints a random join token.
func NewJoinToken() Key { return newKey(JoinTokenPrefix) }

func newKey(prefix string) Key {
	b := make([]byte, 30) // 10 bytes of id, 20 of secret: base32 gives 16 and 32 characters
	_, _ = rand.Read(b)
	return Key{Prefix: prefix, ID: keyEncoding.EncodeToString(b[:10]), Secret: keyEncoding.EncodeToString(b[10:])}
}

// String is the whole key, as the caller sends it.
func (k Key) String() string { return k.Prefix + k.ID + "_" + k.Secret }

// Hash is what the database stores of the secret.
func (k Key) Hash() []byte {
	h := sha256.Sum256([]byte(k.Secret))
	return h[:]
}

// Matches compares the secret with a stored hash in constant time.
func (k Key) Matches(hash []byte) bool { return subtle.ConstantTimeCompare(k.Hash(), hash) == 1 }

// Errors for strings that are not what they should be.
var (
	ErrMalformedKey       = errors.New("malformed API key (want bck_<id>_<secret>)")
	ErrMalformedJoinToken = errors.New("malformed join token (want bcj_<id>_<secret>)")
)

// ParseKey splits an API key into its id and secret.
func ParseKey(s string) (Key, error) { return parse(KeyPrefix, s, ErrMalformedKey) }

// ParseJoinToken splits a join token into its id and secret.
func ParseJoinToken(s string) (Key, error) { return parse(JoinTokenPrefix, s, ErrMalformedJoinToken) }

func parse(prefix, s string, malformed error) (Key, error) {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok {
		return Key{}, malformed
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != keyIDLen || len(secret) != keySecretLen || !isKeyText(id) || !isKeyText(secret) {
		return Key{}, malformed
	}
	return Key{Prefix: prefix, ID: id, Secret: secret}, nil
}

func isKeyText(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
