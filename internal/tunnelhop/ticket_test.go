package tunnelhop_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// TestTickets: a ticket is 32 random bytes in URL-safe base64, stored as its hash.
func TestTickets(t *testing.T) {
	t.Parallel()
	a, ha := tunnelhop.NewTicket()
	b, hb := tunnelhop.NewTicket()
	if len(a) != 43 || strings.ContainsAny(a, "+/=") {
		t.Errorf("ticket %q", a)
	}
	if a == b || bytes.Equal(ha, hb) {
		t.Error("two tickets are the same")
	}
	if !bytes.Equal(tunnelhop.HashTicket(a), ha) || len(ha) != 32 || bytes.Contains(ha, []byte(a)) {
		t.Errorf("hash %x of %q", ha, a)
	}
}
