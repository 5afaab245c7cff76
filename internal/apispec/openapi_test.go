package apispec_test

import (
	"context"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	eventsmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/events/v1"
	"github.com/better-compute/better-compute/internal/apispec"
	"github.com/better-compute/better-compute/internal/registry"
	_ "github.com/better-compute/better-compute/server" // links every core service
)

// TestEveryMethodHasAnOperation walks the registry, with the events module's file, and proves
// that the reference has an operation for each method with its permission, and that the
// document is valid OpenAPI 3.1 by a maintained validator.
func TestEveryMethodHasAnOperation(t *testing.T) {
	t.Parallel()
	module := eventsmodulev1.File_bettercompute_modules_events_v1_events_proto
	reg, err := registry.FromGlobal(module)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := apispec.Reference(module)
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Methods()) < 60 {
		t.Fatalf("the registry has %d methods; the walk would prove little", len(reg.Methods()))
	}
	for _, m := range reg.Methods() {
		item, ok := doc.Paths[m.Route()]
		if !ok || item.Post == nil {
			t.Errorf("%s: no operation", m.Route())
			continue
		}
		op := item.Post
		if op.Permission != m.Permission || op.Public != m.Public || op.Idempotent != m.Idempotent || op.Procedure != m.Procedure {
			t.Errorf("%s: operation says %q/%v/%v/%s, the registry %q/%v/%v/%s", m.Route(),
				op.Permission, op.Public, op.Idempotent, op.Procedure, m.Permission, m.Public, m.Idempotent, m.Procedure)
		}
		if op.Summary == "" {
			t.Errorf("%s: no summary: the RPC needs a doc comment", m.Route())
		}
		if op.Example == nil {
			t.Errorf("%s: no example", m.Route())
		}
	}
	if len(doc.Paths) != len(reg.Methods()) {
		t.Errorf("%d operations for %d methods", len(doc.Paths), len(reg.Methods()))
	}

	body, err := apispec.Encode(doc)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if !loaded.IsOpenAPI31OrLater() || loaded.IsOpenAPI32OrLater() {
		t.Fatalf("openapi = %q", loaded.OpenAPI)
	}
	if err := loaded.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3.1: %v", err)
	}
}
