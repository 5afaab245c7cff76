package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"strings"
)

// KeyPrefix starts every API key, so secret scanners can recognise a leaked one.
const KeyPrefix = "bck_"

// An API key is "bck_<id>_<secret>": the id (16 characters) finds the key's row and may be
// shown and logged; the secret (32 characters, 160 random bits) is shown once and stored only
// as its SHA-256. A slow password hash is not needed: the secret is random, not chosen.
const (
	keyIDLen     = 16
	keySecretLen = 32
)

var keyEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Key is a parsed API key.
type Key struct {
	ID     string
	Secret string
}

// NewKey mints a random key.
func NewKey() Key {
	b := make([]byte, 30) // 10 bytes of id, 20 of secret: base32 gives 16 and 32 characters
	_, _ = rand.Read(b)
	return Key{ID: keyEncoding.EncodeToString(b[:10]), Secret: keyEncoding.EncodeToString(b[10:])}
}

// String is the whole key, as the caller sends it.
func (k Key) String() string { return KeyPrefix + k.ID + "_" + k.Secret }

// Hash is what the database stores of the secret.
func (k Key) Hash() []byte {
	h := sha256.Sum256([]byte(k.Secret))
	return h[:]
}

// Matches compares the secret with a stored hash in constant time.
func (k Key) Matches(hash []byte) bool { return subtle.ConstantTimeCompare(k.Hash(), hash) == 1 }

// ErrMalformedKey is returned for a string that is not an API key.
var ErrMalformedKey = errors.New("malformed API key (want bck_<id>_<secret>)")

// ParseKey splits a key into its id and secret.
func ParseKey(s string) (Key, error) {
	rest, ok := strings.CutPrefix(s, KeyPrefix)
	if !ok {
		return Key{}, ErrMalformedKey
	}
	id, secret, ok := strings.Cut(rest, "_")
	if !ok || len(id) != keyIDLen || len(secret) != keySecretLen || !isKeyText(id) || !isKeyText(secret) {
		return Key{}, ErrMalformedKey
	}
	return Key{ID: id, Secret: secret}, nil
}

func isKeyText(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
