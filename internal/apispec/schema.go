package apispec

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// schemas turns messages and enums into JSON schemas of their protojson form, collecting each
// message and enum once in components under its full proto name.
type schemas struct {
	docs       *Docs
	components map[string]*Schema
}

// ref is the schema of a message or enum used by a field or an operation: a reference to its
// component, or for well-known types the JSON form protojson gives them.
func (s *schemas) message(md protoreflect.MessageDescriptor) *Schema {
	if wkt := wellKnown(md); wkt != nil {
		return wkt
	}
	name := string(md.FullName())
	if _, done := s.components[name]; !done {
		obj := &Schema{Type: "object", Title: string(md.Name()), Description: s.docs.Of(md.FullName()),
			Properties: map[string]*Schema{}, AdditionalProperties: false}
		s.components[name] = obj // before the fields, so a recursive message ends here
		fields := md.Fields()
		for i := range fields.Len() {
			obj.Properties[fields.Get(i).JSONName()] = s.field(fields.Get(i))
			obj.order = append(obj.order, fields.Get(i).JSONName())
		}
		if desc := oneofs(md); desc != "" {
			obj.Description = strings.TrimSpace(obj.Description + "\n\n" + desc)
		}
	}
	return &Schema{Ref: "#/components/schemas/" + name}
}

// oneofs says which fields exclude each other, since a JSON schema of the object does not.
func oneofs(md protoreflect.MessageDescriptor) string {
	var lines []string
	for i := range md.Oneofs().Len() {
		o := md.Oneofs().Get(i)
		if o.IsSynthetic() {
			continue
		}
		var names []string
		for j := range o.Fields().Len() {
			names = append(names, "`"+o.Fields().Get(j).JSONName()+"`")
		}
		lines = append(lines, "At most one of "+strings.Join(names, ", ")+".")
	}
	return strings.Join(lines, "\n")
}

func (s *schemas) enum(ed protoreflect.EnumDescriptor) *Schema {
	name := string(ed.FullName())
	if _, done := s.components[name]; !done {
		values := ed.Values()
		var names, lines []string
		for i := range values.Len() {
			v := values.Get(i)
			names = append(names, string(v.Name()))
			if doc := FirstSentence(s.docs.Of(v.FullName())); doc != "" {
				lines = append(lines, fmt.Sprintf("- `%s`: %s", v.Name(), doc))
			}
		}
		desc := s.docs.Of(ed.FullName())
		if len(lines) > 0 {
			desc = strings.TrimSpace(desc + "\n\n" + strings.Join(lines, "\n"))
		}
		s.components[name] = &Schema{Type: "string", Title: string(ed.Name()), Description: desc, Enum: names}
	}
	return &Schema{Ref: "#/components/schemas/" + name}
}

// field is a field's schema, with its comment.
func (s *schemas) field(fd protoreflect.FieldDescriptor) *Schema {
	var sc *Schema
	switch {
	case fd.IsMap():
		sc = &Schema{Type: "object", AdditionalProperties: s.single(fd.MapValue())}
	case fd.IsList():
		sc = &Schema{Type: "array", Items: s.single(fd)}
	default:
		sc = s.single(fd)
	}
	doc := s.docs.Of(fd.FullName())
	if sc.Ref != "" {
		// A sibling of $ref is allowed in 3.1, but tools show the referenced schema's own text
		// unless the field's is there.
		sc = &Schema{Ref: sc.Ref, Description: doc}
	} else if doc != "" {
		sc.Description = strings.TrimSpace(doc + "\n\n" + sc.Description)
	}
	if opts, ok := fd.Options().(interface{ GetDeprecated() bool }); ok && opts.GetDeprecated() {
		sc.Deprecated = true
	}
	return sc
}

// single is the schema of one value of fd, ignoring whether fd is repeated.
func (s *schemas) single(fd protoreflect.FieldDescriptor) *Schema {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return s.message(fd.Message())
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return &Schema{Type: "null"}
		}
		return s.enum(fd.Enum())
	case protoreflect.BoolKind:
		return &Schema{Type: "boolean"}
	case protoreflect.StringKind:
		return &Schema{Type: "string"}
	case protoreflect.BytesKind:
		return &Schema{Type: "string", ContentEncoding: "base64", Description: "Base64 (standard or URL alphabet)."}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return &Schema{Type: "integer", Format: "int32"}
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return &Schema{Type: "integer", Format: "int64", Minimum: ptr(0), Maximum: ptr(1<<32 - 1)}
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return &Schema{Type: "string", Format: "int64", Pattern: `^-?[0-9]+$`,
			Description: "A 64-bit integer, as a string (a JSON number is also accepted)."}
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return &Schema{Type: "string", Format: "uint64", Pattern: `^[0-9]+$`,
			Description: "A 64-bit unsigned integer, as a string (a JSON number is also accepted)."}
	case protoreflect.FloatKind:
		return &Schema{Type: "number", Format: "float"}
	case protoreflect.DoubleKind:
		return &Schema{Type: "number", Format: "double"}
	}
	return &Schema{}
}

// wellKnown is the protojson form of the google.protobuf types that have a JSON form of their
// own, or nil for any other message.
func wellKnown(md protoreflect.MessageDescriptor) *Schema {
	switch md.FullName() {
	case "google.protobuf.Timestamp":
		return &Schema{Type: "string", Format: "date-time", Description: "An RFC 3339 time in UTC, \"2026-01-02T15:04:05Z\"."}
	case "google.protobuf.Duration":
		return &Schema{Type: "string", Pattern: `^-?[0-9]+(\.[0-9]{1,9})?s$`, Description: "A duration in seconds with an \"s\" suffix, \"3600s\" or \"1.5s\"."}
	case "google.protobuf.FieldMask":
		return &Schema{Type: "string", Description: "Comma-separated field paths in lower camel case, \"description,nodeSelector\"."}
	case "google.protobuf.Struct":
		return &Schema{Type: "object"}
	case "google.protobuf.ListValue":
		return &Schema{Type: "array"}
	case "google.protobuf.Value":
		return &Schema{}
	case "google.protobuf.Empty":
		return &Schema{Type: "object", AdditionalProperties: false}
	case "google.protobuf.Any":
		return &Schema{Type: "object", Properties: map[string]*Schema{"@type": {Type: "string"}}, Required: []string{"@type"}}
	case "google.protobuf.BoolValue":
		return &Schema{Type: "boolean"}
	case "google.protobuf.StringValue":
		return &Schema{Type: "string"}
	case "google.protobuf.BytesValue":
		return &Schema{Type: "string", ContentEncoding: "base64"}
	case "google.protobuf.Int32Value", "google.protobuf.UInt32Value":
		return &Schema{Type: "integer"}
	case "google.protobuf.Int64Value", "google.protobuf.UInt64Value":
		return &Schema{Type: "string", Pattern: `^-?[0-9]+$`}
	case "google.protobuf.FloatValue", "google.protobuf.DoubleValue":
		return &Schema{Type: "number"}
	}
	return nil
}

func ptr(v int64) *int64 { return &v }
