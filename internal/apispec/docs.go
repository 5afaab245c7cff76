// Package apispec describes the API for people: the doc comments of its proto sources, the
// OpenAPI document and the Markdown reference, all built from the method registry so that none of
// them can drift from what the server serves.
package apispec

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// descriptorSet is `buf build --exclude-imports` of proto/, with source info, written by
// scripts/generate: the generated Go code drops comments, so this is where they live.
//
//go:embed descriptors.binpb
var descriptorSet []byte

// Docs holds the doc comments of the API's messages, fields, enums, values, services and methods.
type Docs struct {
	files *protoregistry.Files
}

// LoadDocs parses the embedded descriptor set once; every caller shares the result.
var LoadDocs = sync.OnceValues(func() (*Docs, error) {
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(descriptorSet, &set); err != nil {
		return nil, fmt.Errorf("apispec: descriptor set: %w", err)
	}
	files, err := protodesc.FileOptions{AllowUnresolvable: true}.NewFiles(&set)
	if err != nil {
		return nil, fmt.Errorf("apispec: descriptor set: %w", err)
	}
	return &Docs{files: files}, nil
})

// Of returns the leading comment of the element named name, its lines trimmed, or "" when it has
// none or is not an API element. A nil *Docs has no comments.
func (d *Docs) Of(name protoreflect.FullName) string {
	if d == nil {
		return ""
	}
	desc, err := d.files.FindDescriptorByName(name)
	if err != nil {
		return ""
	}
	return clean(desc.ParentFile().SourceLocations().ByDescriptor(desc).LeadingComments)
}

// Has reports whether the proto file at path (as its descriptor names it) is one of this
// repository's: a module built elsewhere brings files the embedded descriptors do not hold. A nil
// *Docs has none.
func (d *Docs) Has(path string) bool {
	if d == nil {
		return false
	}
	_, err := d.files.FindFileByPath(path)
	return err == nil
}

// Summary is the first sentence of name's comment: a CLI's short help, an operation's summary.
func (d *Docs) Summary(name protoreflect.FullName) string {
	return FirstSentence(d.Of(name))
}

// FirstSentence returns text up to its first full stop that ends a sentence, on one line.
func FirstSentence(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	for i := 0; i < len(text); i++ {
		if text[i] == '.' && (i+1 == len(text) || text[i+1] == ' ') {
			return text[:i+1]
		}
	}
	return text
}

// clean removes the one space protoc leaves after each "//" and the trailing newline.
func clean(comment string) string {
	lines := strings.Split(strings.TrimRight(comment, "\n "), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimRight(l, " "), " ")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
