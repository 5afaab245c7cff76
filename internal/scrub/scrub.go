// Package scrub makes text that arrives from outside the control plane (a node's hostname,
// inventory, command output and errors, events) safe to encode and to store: valid UTF-8, which
// protobuf requires of every string, and free of the NUL character, which PostgreSQL refuses in
// both text and jsonb. A bad byte becomes U+FFFD; nothing else changes, so control characters,
// quotes and line separators pass through (the JSON encoders escape them).
//
// It exists so that a node reporting odd bytes gets them stored, visibly replaced, instead of a
// failed insert that ends its session and loops through reconnects.
package scrub

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Replacement is what a NUL or an invalid UTF-8 sequence becomes.
const Replacement = "\uFFFD"

// Clean reports whether s is valid UTF-8 without NUL: String would return it unchanged.
func Clean(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// String returns s with every invalid UTF-8 sequence and every NUL replaced by U+FFFD.
func String(s string) string {
	if Clean(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, Replacement), "\x00", Replacement)
}

// Truncate returns at most the first n bytes of s, cut at a rune boundary, so that a valid
// UTF-8 string stays valid (PostgreSQL refuses half a rune in text columns).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Message scrubs every string in m, in place: singular and repeated fields, map keys and
// values, and nested messages (so the keys and string values of a google.protobuf.Struct too).
// Bytes fields are left alone. It reports whether anything changed; m may be nil.
func Message(m proto.Message) bool {
	if m == nil {
		return false
	}
	r := m.ProtoReflect()
	if !r.IsValid() {
		return false
	}
	return message(r)
}

func message(m protoreflect.Message) bool {
	changed := false
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			changed = mapField(fd, v.Map()) || changed
		case fd.IsList():
			l := v.List()
			for i := range l.Len() {
				if nv, ok := value(fd, l.Get(i)); ok {
					l.Set(i, nv)
					changed = true
				}
			}
		default:
			// Setting the field being visited is the one change Range allows.
			if nv, ok := value(fd, v); ok {
				m.Set(fd, nv)
				changed = true
			}
		}
		return true
	})
	return changed
}

// value scrubs one value of field fd: a string is replaced (ok is true when it had to be), a
// message is scrubbed in place.
func value(fd protoreflect.FieldDescriptor, v protoreflect.Value) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.StringKind:
		if s := v.String(); !Clean(s) {
			return protoreflect.ValueOfString(String(s)), true
		}
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return v, message(v.Message())
	}
	return v, false
}

func mapField(fd protoreflect.FieldDescriptor, mp protoreflect.Map) bool {
	type rename struct {
		from, to protoreflect.MapKey
		v        protoreflect.Value
	}
	var renames []rename
	changed := false
	mp.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
		nv, ok := value(fd.MapValue(), v)
		if ok {
			changed = true
		}
		if fd.MapKey().Kind() == protoreflect.StringKind && !Clean(k.String()) {
			renames = append(renames, rename{k, protoreflect.ValueOfString(String(k.String())).MapKey(), nv})
		} else if ok {
			mp.Set(k, nv) // replacing the value of the key being visited is allowed
		}
		return true
	})
	// Keys change after the walk: a map must not gain or lose keys while it is ranged over.
	for _, r := range renames {
		mp.Clear(r.from)
		mp.Set(r.to, r.v)
	}
	return changed || len(renames) > 0
}
