package tunnel

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDocumented: docs/tunnels.md lists every close code and every refusal with its meaning,
// so the documentation cannot drift from the code.
func TestDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/tunnels.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, c := range Codes {
		if row := fmt.Sprintf("| %d | %s |", c, c.Describe()); !strings.Contains(doc, row) {
			t.Errorf("docs/tunnels.md lacks the row %q", row)
		}
	}
	for _, r := range Refusals {
		if row := fmt.Sprintf("| %d | %s |", r.Status, strings.ReplaceAll(r.Reason, Subprotocol, "`"+Subprotocol+"`")); !strings.Contains(doc, row) {
			t.Errorf("docs/tunnels.md lacks the row %q", row)
		}
	}
}
