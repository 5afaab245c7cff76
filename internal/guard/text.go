package guard

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/apierr"
)

// checkText refuses a request holding a string that no handler could store: one with the NUL
// character, which PostgreSQL refuses in text and jsonb alike, so it would otherwise fail deep in
// a handler as an internal error. Every string is checked, at any depth: fields, list items, map
// keys and values, and the keys and strings of a google.protobuf.Struct. Protobuf has already
// refused invalid UTF-8 while decoding. The error names the field ("payload[\"k\"][0]").
func checkText(req any) error {
	m, ok := req.(proto.Message)
	if !ok || m == nil || !hasNUL(m.ProtoReflect()) {
		return nil
	}
	// Only a refused request pays for the walk that names the field.
	return textIn(m.ProtoReflect(), "")
}

// hasNUL reports whether any string in m, at any depth, holds NUL; it builds no paths, so the
// check costs every request only a walk over its fields.
func hasNUL(m protoreflect.Message) bool {
	if !m.IsValid() {
		return false
	}
	found := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				found = (fd.MapKey().Kind() == protoreflect.StringKind && strings.IndexByte(k.String(), 0) >= 0) ||
					valueHasNUL(fd.MapValue(), mv)
				return !found
			})
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && !found; i++ {
				found = valueHasNUL(fd, l.Get(i))
			}
		default:
			found = valueHasNUL(fd, v)
		}
		return !found
	})
	return found
}

func valueHasNUL(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return strings.IndexByte(v.String(), 0) >= 0
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return hasNUL(v.Message())
	}
	return false
}

// maxKeyShown bounds how much of a map key an error message repeats.
const maxKeyShown = 40

func textIn(m protoreflect.Message, path string) error {
	if !m.IsValid() {
		return nil
	}
	// The JSON-shaped well-known types read as their JSON: payload["k"][0], not
	// payload.fields["k"].list_value.values[0].
	transparent := false
	switch m.Descriptor().FullName() {
	case "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue":
		transparent = true
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := path
		if !transparent {
			name = join(path, string(fd.Name()))
		}
		switch {
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				key := k.String()
				at := fmt.Sprintf("%s[%q]", name, shorten(key))
				if fd.MapKey().Kind() == protoreflect.StringKind && strings.IndexByte(key, 0) >= 0 {
					err = nulIn(at + " (the key)")
				} else {
					err = textInValue(fd.MapValue(), mv, at)
				}
				return err == nil
			})
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if err = textInValue(fd, l.Get(i), fmt.Sprintf("%s[%d]", name, i)); err != nil {
					break
				}
			}
		default:
			err = textInValue(fd, v, name)
		}
		return err == nil
	})
	return err
}

func textInValue(fd protoreflect.FieldDescriptor, v protoreflect.Value, path string) error {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if strings.IndexByte(v.String(), 0) >= 0 {
			return nulIn(path)
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return textIn(v.Message(), path)
	}
	return nil
}

func nulIn(path string) error {
	if path == "" {
		path = "request"
	}
	return apierr.InvalidArgument(path, "must not contain the NUL character (U+0000)")
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func shorten(s string) string {
	if len(s) <= maxKeyShown {
		return s
	}
	return strings.ToValidUTF8(s[:maxKeyShown], "") + "…"
}
