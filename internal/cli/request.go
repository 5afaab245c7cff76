package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/better-compute/better-compute/internal/apispec"
)

// reserved are the flags of every method command; a request field of one of these names is set
// only through --data.
var reserved = map[string]bool{
	"data": true, "output": true, "all": true, "request-timeout": true, "codec": true,
	"api": true, "api-key": true, "context": true, "config": true, "help": true,
}

// requestFlags turns a method's flags and --data into its request message.
type requestFlags struct {
	md     protoreflect.MessageDescriptor
	fields []*fieldFlag
	data   string
}

// add declares a flag for each field of md that can be one, and --data for the rest.
func (r *requestFlags) add(fs *pflag.FlagSet, docs *apispec.Docs) {
	fields := r.md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := flagName(fd)
		if !flaggable(fd) || reserved[name] || fs.Lookup(name) != nil {
			continue
		}
		ff := &fieldFlag{fd: fd}
		usage := apispec.FirstSentence(docs.Of(fd.FullName()))
		if fd.Kind() == protoreflect.EnumKind {
			usage = strings.TrimSpace(usage + " One of " + strings.Join(enumNames(fd.Enum()), ", ") + ".")
		}
		if fd.IsList() || fd.IsMap() {
			usage = strings.TrimSpace(usage + " Repeat the flag or separate values with commas.")
		}
		f := fs.VarPF(ff, name, "", usage)
		if fd.Kind() == protoreflect.BoolKind && !fd.IsList() {
			f.NoOptDefVal = "true"
		}
		r.fields = append(r.fields, ff)
	}
	fs.StringVar(&r.data, "data", "", "the request as protojson: '{…}', @file, or @- for standard input (flags override its fields)")
}

// enumNames are the short names of ed's values, without the unspecified zero.
func enumNames(ed protoreflect.EnumDescriptor) []string {
	var out []string
	for i := range ed.Values().Len() {
		if v := ed.Values().Get(i); v.Number() != 0 {
			out = append(out, shortEnumName(v))
		}
	}
	return out
}

// build decodes --data (if any) with the set flags over it into a new request; unknown fields
// are errors naming them.
func (r *requestFlags) build(fs *pflag.FlagSet, stdin io.Reader) (*dynamicpb.Message, error) {
	obj := map[string]json.RawMessage{}
	if r.data != "" {
		raw := []byte(r.data)
		if path, ok := strings.CutPrefix(r.data, "@"); ok {
			b, err := readBounded(path, stdin)
			if err != nil {
				return nil, usageError(fmt.Errorf("--data: %w", err))
			}
			raw = b
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, &obj); err != nil {
				return nil, usageError(fmt.Errorf("--data: not a JSON object: %w", err))
			}
		}
	}
	for _, ff := range r.fields {
		if !fs.Changed(flagName(ff.fd)) {
			continue
		}
		// The flag replaces the field however --data spelled it, and the other members of its
		// oneof.
		drop := []protoreflect.FieldDescriptor{ff.fd}
		if od := ff.fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			for i := range od.Fields().Len() {
				drop = append(drop, od.Fields().Get(i))
			}
		}
		for _, fd := range drop {
			delete(obj, fd.JSONName())
			delete(obj, string(fd.Name()))
		}
		b, err := json.Marshal(ff.json())
		if err != nil {
			return nil, usageError(fmt.Errorf("--%s: %w", flagName(ff.fd), err))
		}
		obj[ff.fd.JSONName()] = b
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, usageError(err)
	}
	msg := dynamicpb.NewMessage(r.md)
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(b, msg); err != nil {
		return nil, usageError(fmt.Errorf("request %s: %w", r.md.Name(), err))
	}
	return msg, nil
}

// readAtMost reads r to its end, failing when it holds more than limit bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return b, nil
}
