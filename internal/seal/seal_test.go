package seal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	secret := "0123456789abcdef0123456789abcdef"
	s, err := New(secret, "test")
	if err != nil {
		t.Fatal(err)
	}
	sealed := s.Seal([]byte("hello"), []byte("row-1"))
	if bytes.Contains(sealed, []byte("hello")) {
		t.Fatal("plaintext visible in sealed value")
	}
	if pt, err := s.Open(sealed, []byte("row-1")); err != nil || string(pt) != "hello" {
		t.Fatalf("Open = %q, %v", pt, err)
	}
	if _, err := s.Open(sealed, []byte("row-2")); !errors.Is(err, ErrOpen) {
		t.Errorf("Open with other aad = %v, want ErrOpen", err)
	}
	other, _ := New(secret, "other purpose")
	if _, err := other.Open(sealed, []byte("row-1")); !errors.Is(err, ErrOpen) {
		t.Errorf("Open for another purpose = %v, want ErrOpen", err)
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := s.Open(sealed, []byte("row-1")); !errors.Is(err, ErrOpen) {
		t.Errorf("Open of tampered value = %v, want ErrOpen", err)
	}
	if _, err := New("short", "test"); err == nil {
		t.Error("New accepted a short secret")
	}
}
