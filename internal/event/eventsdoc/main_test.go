package main

import (
	"bytes"
	"os"
	"testing"
)

// TestDocsCurrent: the committed docs/events.md is what the catalog generates; every event type
// and payload field has a doc comment (render refuses one without).
func TestDocsCurrent(t *testing.T) {
	t.Parallel()
	want, err := render("..")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("docs/events.md is not current: go run ./internal/event/eventsdoc > docs/events.md")
	}
}
