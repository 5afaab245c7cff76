package cli

import (
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/better-compute/better-compute/gen/go/bettercompute/api/v1"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// defaultColumns is how many scalar fields a table shows of a message without a table option.
const defaultColumns = 6

// nextPageTokenField is the response field of paged lists.
const nextPageTokenField = "next_page_token"

// printResponse writes res in format.
func printResponse(w io.Writer, format string, res proto.Message) error {
	switch format {
	case outputJSON:
		b, err := marshalJSON(res)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case outputYAML:
		b, err := marshalJSON(res)
		if err != nil {
			return err
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return fmt.Errorf("yaml: %w", err)
		}
		blockStyle(&doc)
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(&doc); err != nil {
			return fmt.Errorf("yaml: %w", err)
		}
		return enc.Close()
	default:
		return printTable(w, res.ProtoReflect())
	}
}

func marshalJSON(m proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	return b, nil
}

// blockStyle drops the flow style JSON parses into, so YAML prints in block style.
func blockStyle(n *yaml.Node) {
	if n.Kind != yaml.ScalarNode {
		n.Style = 0
	} else if n.Tag == "!!str" {
		n.Style = 0
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// printTable writes a response for a person: its scalar fields as aligned "key: value" lines
// (the fields of its one message field, when it has one), then each list of messages as a table,
// titled when there is anything else.
func printTable(w io.Writer, res protoreflect.Message) error {
	var pairs [][2]string
	var lists []protoreflect.FieldDescriptor
	fields := res.Descriptor().Fields()
	singles := 0
	for i := range fields.Len() {
		fd := fields.Get(i)
		if isMessageList(fd) {
			lists = append(lists, fd)
		} else if isObject(fd) && res.Has(fd) {
			singles++
		}
	}
	for i := range fields.Len() {
		fd := fields.Get(i)
		if isMessageList(fd) || fd.Name() == nextPageTokenField || (!res.Has(fd) && !countable(fd)) {
			continue
		}
		prefix := fd.JSONName() + "."
		if singles == 1 {
			prefix = ""
		}
		if isObject(fd) {
			pairs = flatten(pairs, prefix, res.Get(fd).Message())
			continue
		}
		pairs = append(pairs, [2]string{fd.JSONName(), format(fd, res.Get(fd))})
	}
	if len(pairs) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
		for _, p := range pairs {
			fmt.Fprintf(tw, "%s:\t%s\n", p[0], p[1])
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	for i, fd := range lists {
		if !res.Has(fd) && (len(pairs) > 0 || len(lists) > 1) {
			continue
		}
		if len(pairs) > 0 || i > 0 {
			fmt.Fprintln(w)
		}
		if len(pairs) > 0 || len(lists) > 1 {
			fmt.Fprintf(w, "%s:\n", fd.JSONName())
		}
		if err := writeRows(w, fd.Message(), res.Get(fd).List()); err != nil {
			return err
		}
	}
	return nil
}

// isMessageList is a repeated field of messages that are not well-known values.
func isMessageList(fd protoreflect.FieldDescriptor) bool {
	return fd.IsList() && fd.Kind() == protoreflect.MessageKind && !wellKnown(fd.Message())
}

// isObject is a singular message field that is not a well-known value.
func isObject(fd protoreflect.FieldDescriptor) bool {
	return !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind && !wellKnown(fd.Message())
}

func wellKnown(md protoreflect.MessageDescriptor) bool {
	return strings.HasPrefix(string(md.FullName()), "google.protobuf.")
}

// flatten appends m's set fields as key/value pairs, nested messages with dotted keys.
func flatten(pairs [][2]string, prefix string, m protoreflect.Message) [][2]string {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if !m.Has(fd) && !countable(fd) {
			continue
		}
		if isObject(fd) {
			pairs = flatten(pairs, prefix+fd.JSONName()+".", m.Get(fd).Message())
			continue
		}
		pairs = append(pairs, [2]string{prefix + fd.JSONName(), format(fd, m.Get(fd))})
	}
	return pairs
}

// columnsOf are the columns of a table of md: its (bettercompute.api.v1.table) option, else its
// first scalar fields.
func columnsOf(md protoreflect.MessageDescriptor) []string {
	if t, ok := proto.GetExtension(md.Options(), apiv1.E_Table).(*apiv1.Table); ok && len(t.GetColumns()) > 0 {
		return t.GetColumns()
	}
	var cols []string
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsList() || fd.IsMap() || isObject(fd) {
			continue
		}
		if cols = append(cols, fd.JSONName()); len(cols) == defaultColumns {
			break
		}
	}
	return cols
}

// writeRows writes items as a table with a header line.
func writeRows(w io.Writer, md protoreflect.MessageDescriptor, items protoreflect.List) error {
	cols := columnsOf(md)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = strings.ToUpper(kebab(strings.ReplaceAll(c, ".", "_")))
		head[i] = strings.ReplaceAll(head[i], "-", "_")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for i := range items.Len() {
		m := items.Get(i).Message()
		row := make([]string, len(cols))
		for j, c := range cols {
			row[j] = cell(m, c)
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// cell is the value at path (JSON names joined by dots) of m, or "" when unset.
func cell(m protoreflect.Message, path string) string {
	names := strings.Split(path, ".")
	for i, name := range names {
		fd := m.Descriptor().Fields().ByJSONName(name)
		if fd == nil {
			fd = m.Descriptor().Fields().ByName(protoreflect.Name(name))
		}
		if fd == nil {
			return ""
		}
		if !m.Has(fd) {
			if i == len(names)-1 && countable(fd) {
				return format(fd, m.Get(fd)) // 0 and false say something in a column
			}
			return ""
		}
		if i < len(names)-1 && isObject(fd) {
			m = m.Get(fd).Message()
			continue
		}
		return format(fd, m.Get(fd))
	}
	return ""
}

// countable is a number or bool without presence, whose zero value is a value.
func countable(fd protoreflect.FieldDescriptor) bool {
	if fd.IsList() || fd.IsMap() || fd.HasPresence() {
		return false
	}
	switch fd.Kind() {
	case protoreflect.StringKind, protoreflect.BytesKind, protoreflect.EnumKind, protoreflect.MessageKind, protoreflect.GroupKind:
		return false
	}
	return true
}

// format writes a field's value on one line: enums by their short name, times in RFC 3339,
// durations as Go durations, lists and maps comma separated, other messages as compact JSON.
func format(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch {
	case fd.IsMap():
		var kvs []string
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			kvs = append(kvs, k.String()+"="+formatOne(fd.MapValue(), mv))
			return true
		})
		slices.Sort(kvs)
		return strings.Join(kvs, ",")
	case fd.IsList():
		l := v.List()
		out := make([]string, l.Len())
		for i := range l.Len() {
			out[i] = formatOne(fd, l.Get(i))
		}
		return strings.Join(out, ",")
	}
	return formatOne(fd, v)
}

func formatOne(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return shortEnumName(ev)
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.BytesKind:
		return base64.StdEncoding.EncodeToString(v.Bytes())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		m := v.Message()
		switch fd.Message().FullName() {
		case timestampType:
			return time.Unix(m.Get(field(m, "seconds")).Int(), m.Get(field(m, "nanos")).Int()).UTC().Format(time.RFC3339)
		case durationType:
			return (time.Duration(m.Get(field(m, "seconds")).Int())*time.Second + time.Duration(m.Get(field(m, "nanos")).Int())).String()
		}
		b, err := protojson.Marshal(m.Interface())
		if err != nil {
			return "?"
		}
		return string(b)
	}
	return v.String()
}

func field(m protoreflect.Message, name protoreflect.Name) protoreflect.FieldDescriptor {
	return m.Descriptor().Fields().ByName(name)
}
