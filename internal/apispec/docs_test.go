package apispec

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

func TestDocsOf(t *testing.T) {
	t.Parallel()
	docs, err := LoadDocs()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{
		"bettercompute.nodes.v1.NodesService.List",
		"bettercompute.nodes.v1.ListRequest",
		"bettercompute.leases.v1.CreateRequest.pool_id",
	} {
		if got := docs.Of(protoreflect.FullName(name)); got == "" || strings.HasPrefix(got, " ") {
			t.Errorf("Of(%s) = %q, want its comment", name, got)
		}
	}
	if got := docs.Of("no.such.Thing"); got != "" {
		t.Errorf("Of(unknown) = %q", got)
	}
	if got := FirstSentence("Lists nodes. Each one\n has e.g. a name."); got != "Lists nodes." {
		t.Errorf("FirstSentence = %q", got)
	}
}
