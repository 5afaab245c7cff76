package gateway

import (
	"slices"
	"testing"

	"github.com/google/uuid"
)

// TestDueNodes checks that pokes arriving while a round runs are merged, each node once, and
// that none is dropped however many arrive: the loop is woken once and takes them all.
func TestDueNodes(t *testing.T) {
	t.Parallel()
	d := newDueNodes()
	a, b := uuid.New(), uuid.New()
	for range 5000 { // more than any queue the pokes had
		d.add(a)
	}
	d.add(b, a)
	d.add()
	select {
	case <-d.wake:
	default:
		t.Fatal("no wake token after add")
	}
	select {
	case <-d.wake:
		t.Fatal("a second wake token for one round")
	default:
	}
	got := d.take()
	if len(got) != 2 || !slices.Contains(got, a) || !slices.Contains(got, b) {
		t.Fatalf("take = %v, want %v and %v once each", got, a, b)
	}
	if got := d.take(); len(got) != 0 {
		t.Fatalf("take after take = %v, want none", got)
	}
}
