package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Well-known types a flag takes in a form people type.
const (
	durationType  = "google.protobuf.Duration"
	timestampType = "google.protobuf.Timestamp"
	fieldMaskType = "google.protobuf.FieldMask"
)

// fieldFlag is a pflag.Value for one request field: each Set checks its text and keeps it as the
// field's protojson value, which the request is then decoded from.
type fieldFlag struct {
	fd   protoreflect.FieldDescriptor
	list []any
	m    map[string]any
	one  any
}

// flaggable says whether fd can be a flag: a scalar, an enum, a Duration, Timestamp or
// FieldMask, a list of those, or a map from strings to strings.
func flaggable(fd protoreflect.FieldDescriptor) bool {
	if fd.IsMap() {
		return fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind
	}
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		switch fd.Message().FullName() {
		case durationType, timestampType:
			return true
		case fieldMaskType:
			return !fd.IsList()
		}
		return false
	}
	return true
}

// flagName is the kebab case of the field's JSON name: poolId is --pool-id.
func flagName(fd protoreflect.FieldDescriptor) string { return kebab(fd.JSONName()) }

// kebab turns lowerCamel into lower-kebab.
func kebab(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (f *fieldFlag) String() string { return "" }

// Type is what the help shows after the flag's name.
func (f *fieldFlag) Type() string {
	switch {
	case f.fd.IsMap():
		return "key=value"
	case f.fd.Kind() == protoreflect.MessageKind:
		switch f.fd.Message().FullName() {
		case durationType:
			return "duration"
		case timestampType:
			return "time"
		default:
			return "paths"
		}
	case f.fd.Kind() == protoreflect.EnumKind:
		return "enum"
	case f.fd.Kind() == protoreflect.BytesKind:
		return "base64|@file"
	case f.fd.Kind() == protoreflect.BoolKind && !f.fd.IsList():
		return "bool"
	}
	t := strings.ToLower(f.fd.Kind().String())
	if f.fd.IsList() {
		t += "s"
	}
	return t
}

// Set parses one occurrence of the flag; lists and maps take several, or a comma list.
func (f *fieldFlag) Set(s string) error {
	switch {
	case f.fd.IsMap():
		if f.m == nil {
			f.m = map[string]any{}
		}
		for kv := range strings.SplitSeq(s, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("want key=value, got %q", kv)
			}
			f.m[k] = v
		}
	case f.fd.IsList():
		parts := []string{s}
		if f.fd.Kind() != protoreflect.BytesKind {
			parts = strings.Split(s, ",")
		}
		for _, p := range parts {
			v, err := scalarJSON(f.fd, strings.TrimSpace(p))
			if err != nil {
				return err
			}
			f.list = append(f.list, v)
		}
	default:
		v, err := scalarJSON(f.fd, s)
		if err != nil {
			return err
		}
		f.one = v
	}
	return nil
}

// json is the field's value for the request's protojson.
func (f *fieldFlag) json() any {
	switch {
	case f.fd.IsMap():
		return f.m
	case f.fd.IsList():
		return f.list
	default:
		return f.one
	}
}

// scalarJSON checks s as a value of fd's kind and returns it as protojson takes it.
func scalarJSON(fd protoreflect.FieldDescriptor, s string) (any, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("want true or false, got %q", s)
		}
		return b, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return intJSON(s, 32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return intJSON(s, 64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return uintJSON(s, 32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return uintJSON(s, 64)
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("want a number, got %q", s)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return strconv.FormatFloat(f, 'g', -1, 64), nil
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case protoreflect.StringKind:
		return s, nil
	case protoreflect.BytesKind:
		return bytesJSON(s)
	case protoreflect.EnumKind:
		return enumValue(fd.Enum(), s)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		switch fd.Message().FullName() {
		case durationType:
			d, err := time.ParseDuration(s)
			if err != nil {
				return nil, fmt.Errorf("want a duration such as 90s, 1h or 1h30m, got %q", s)
			}
			return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s", nil
		case timestampType:
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, fmt.Errorf("want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", s)
			}
			return t.UTC().Format(time.RFC3339Nano), nil
		case fieldMaskType:
			return s, nil
		}
	}
	return nil, fmt.Errorf("field %s cannot be a flag; use --data", fd.Name())
}

func intJSON(s string, bits int) (any, error) {
	if _, err := strconv.ParseInt(s, 10, bits); err != nil {
		return nil, fmt.Errorf("want an integer of %d bits, got %q", bits, s)
	}
	return json.Number(s), nil
}

func uintJSON(s string, bits int) (any, error) {
	if _, err := strconv.ParseUint(s, 10, bits); err != nil {
		return nil, fmt.Errorf("want a non-negative integer of %d bits, got %q", bits, s)
	}
	return json.Number(s), nil
}

// bytesJSON reads @file or checks base64, and returns the bytes in base64.
func bytesJSON(s string) (any, error) {
	if path, ok := strings.CutPrefix(s, "@"); ok {
		b, err := readBounded(path, nil)
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString(b), nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b, err = base64.URLEncoding.DecodeString(s); err != nil {
			return nil, fmt.Errorf("want base64 or @file, got %q", s)
		}
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// enumPrefix is what every value name of ed starts with, up to an underscore: NODE_STATE_ of
// NODE_STATE_READY, NODE_STATE_DRAINING.
func enumPrefix(ed protoreflect.EnumDescriptor) string {
	vals := ed.Values()
	if vals.Len() < 2 {
		return ""
	}
	prefix := string(vals.Get(0).Name())
	for i := 1; i < vals.Len(); i++ {
		name := string(vals.Get(i).Name())
		for !strings.HasPrefix(name, prefix) {
			prefix = prefix[:len(prefix)-1]
		}
	}
	if i := strings.LastIndexByte(prefix, '_'); i >= 0 {
		return prefix[:i+1]
	}
	return ""
}

// shortEnumName is a value's name without its type's prefix, in lower case: ready.
func shortEnumName(v protoreflect.EnumValueDescriptor) string {
	return strings.ToLower(strings.TrimPrefix(string(v.Name()), enumPrefix(v.Parent().(protoreflect.EnumDescriptor))))
}

// enumValue finds the value s names: its full name, or its short name in any case, with - or _.
func enumValue(ed protoreflect.EnumDescriptor, s string) (any, error) {
	if v := ed.Values().ByName(protoreflect.Name(s)); v != nil {
		return string(v.Name()), nil
	}
	want := strings.ToLower(strings.ReplaceAll(s, "-", "_"))
	vals := ed.Values()
	var names []string
	for i := range vals.Len() {
		v := vals.Get(i)
		short := shortEnumName(v)
		if short == want || strings.ToLower(string(v.Name())) == want {
			return string(v.Name()), nil
		}
		if v.Number() != 0 {
			names = append(names, short)
		}
	}
	return nil, fmt.Errorf("want one of %s, got %q", strings.Join(names, ", "), s)
}

// maxInput bounds what --data and @file read: requests are small.
const maxInput = 4 << 20

// readBounded reads path, or stdin when path is "-", failing past maxInput.
func readBounded(path string, stdin io.Reader) ([]byte, error) {
	var r io.Reader
	if path == "-" && stdin != nil {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	b, err := readAtMost(r, maxInput)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}
