package apispec

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/registry"
)

// Reference is the document docs/openapi.json and docs/api.md hold: every method linked into the
// binary and every method of the modules' files, at the default base path, with examples. The
// caller links the services in (the server's packages register them).
func Reference(modules ...protoreflect.FileDescriptor) (*Document, error) {
	reg, err := registry.FromGlobal(modules...)
	if err != nil {
		return nil, err
	}
	docs, err := LoadDocs()
	if err != nil {
		return nil, err
	}
	return Build(reg, docs, Options{BasePath: config.Default().BasePath, Examples: true})
}
