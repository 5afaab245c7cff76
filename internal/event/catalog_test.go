package event

import (
	"encoding/json"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// camelCase is the form of every payload key (and of a nested key's parts).
var camelCase = regexp.MustCompile(`^[a-z][A-Za-z0-9]*(\.[a-z][A-Za-z0-9]*)*$`)

// TestCatalog: names are unique and each Go type appears once; every entry has a subject of its
// kind and camelCase keys.
func TestCatalog(t *testing.T) {
	t.Parallel()
	names, goTypes := map[string]bool{}, map[string]bool{}
	for _, s := range Catalog() {
		if names[s.Name] || goTypes[s.GoType] {
			t.Errorf("%s (%s) is listed twice", s.Name, s.GoType)
		}
		names[s.Name], goTypes[s.GoType] = true, true
		kind, _, _ := strings.Cut(s.Name, ".")
		if s.Subject != kind+"/<id>" {
			t.Errorf("%s: subject %q, want %s/<id>", s.Name, s.Subject, kind)
		}
		if !s.Family && len(s.Fields) == 0 {
			t.Errorf("%s has no payload fields", s.Name)
		}
		for _, f := range s.Fields {
			if !camelCase.MatchString(f.Name) {
				t.Errorf("%s: key %q is not camelCase", s.Name, f.Name)
			}
		}
	}
}

// TestPayloadsRoundTrip: every event, with every field set, marshals to exactly the catalog's
// keys and decodes back to itself.
func TestPayloadsRoundTrip(t *testing.T) {
	t.Parallel()
	for i, zero := range all {
		if _, ok := zero.(NodeReported); ok {
			continue // its payload is the daemon's; TestReport covers it
		}
		spec := catalog[i]
		t.Run(spec.Name, func(t *testing.T) {
			t.Parallel()
			v := reflect.New(reflect.TypeOf(zero)).Elem()
			fill(t, v)
			ev := v.Interface().(Event)
			b, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, f := range spec.Fields {
				want = append(want, f.Name)
			}
			if got := keys(m, ""); !slices.Equal(got, sorted(want)) {
				t.Errorf("keys %v, want %v (%s)", got, sorted(want), b)
			}
			back := reflect.New(v.Type())
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(back.Interface()); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Elem().Interface(), ev) {
				t.Errorf("round trip: %+v, want %+v", back.Elem().Interface(), ev)
			}
			if ev.Type() != spec.Name || !strings.HasSuffix(ev.Subject(), "/"+idOf(t, m)) {
				t.Errorf("type %q subject %q for %s", ev.Type(), ev.Subject(), b)
			}
		})
	}
}

// idOf is the id a payload's subject names.
func idOf(t *testing.T, m map[string]any) string {
	t.Helper()
	for _, k := range []string{"id", "webhookId", "workflowId", "uuid"} {
		if s, ok := m[k].(string); ok {
			return s
		}
	}
	t.Fatalf("no id in %v", m)
	return ""
}

// keys lists m's keys, nested objects' as "parent.child", sorted; a map of a payload (labels,
// a selector, an inventory) counts as a value.
func keys(m map[string]any, prefix string) []string {
	var out []string
	for k, v := range m {
		out = append(out, prefix+k)
		if sub, ok := v.(map[string]any); ok && prefix+k == "quota" {
			out = append(out, keys(sub, prefix+k+".")...)
		}
	}
	return sorted(out)
}

func sorted(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

// fill sets every field of v to a value that is not empty.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Type() {
	case uuidType:
		v.Set(reflect.ValueOf(uuid.New()))
		return
	case timeType:
		v.Set(reflect.ValueOf(time.Date(2025, 1, 2, 3, 4, 5, 678000000, time.UTC)))
		return
	case rawJSONType:
		v.Set(reflect.ValueOf(json.RawMessage(`{"hostname":"h","gpus":[{"model":"m"}]}`)))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.String:
		v.SetString("a \"quoted\" \x01 value")
	case reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(7.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0))
		fill(t, v.Index(1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k)
		fill(t, e)
		v.SetMapIndex(k, e)
	default:
		t.Fatalf("fill: no value for a %s", v.Type())
	}
}

// TestKnown: webhooks may name the catalog's types and daemon reports, nothing else.
func TestKnown(t *testing.T) {
	t.Parallel()
	for _, s := range Catalog() {
		if !s.Family && !Known(s.Name) {
			t.Errorf("%s is not known", s.Name)
		}
	}
	for typ, want := range map[string]bool{
		"node.disk.full": true, "node.gpu.xid_79": true,
		"node.updated": false, "node.cordonned": false, "node.spec.applyed": false, "node.joined.again": false,
		"node.": false, "node.disk": false, "never.happens": false, "node.<report>": false, "": false,
		"lease.*": false, "node.disk.full ": false, "node." + strings.Repeat("a.", 60) + "b": false,
	} {
		if Known(typ) != want {
			t.Errorf("Known(%q) = %v, want %v", typ, !want, want)
		}
	}
}

// TestReport: a daemon's report is stored as "node.<report>" with its data as the payload; a
// report that could pass for a catalog event is not valid.
func TestReport(t *testing.T) {
	t.Parallel()
	node := uuid.New()
	ev := NodeReported{Node: node, Report: "disk.full", Data: json.RawMessage(`{"mount": "/", "freeBytes": 0}`)}
	b, err := json.Marshal(ev)
	if err != nil || string(b) != `{"mount":"/","freeBytes":0}` || ev.Type() != "node.disk.full" || ev.Subject() != "node/"+node.String() {
		t.Errorf("%s %s %s (%v)", ev.Type(), ev.Subject(), b, err)
	}
	if b, err := json.Marshal(NodeReported{Node: node, Report: "x.y"}); err != nil || string(b) != "null" {
		t.Errorf("no data: %s (%v)", b, err)
	}
	for _, r := range []string{"revoked", "spec.applied", "inventory.changed", "ready.x", "disk", "disk..full", "disk.full!"} {
		if ValidReport(r) {
			t.Errorf("ValidReport(%q)", r)
		}
	}
	if want := []string{"cordoned", "drained", "draining", "gpu_quarantined", "gpu_released", "inventory", "joined", "labeled", "offline", "online", "ready", "retired", "revoked", "spec", "uncordoned"}; !slices.Equal(slices.Sorted(maps.Keys(reservedReports)), want) {
		t.Errorf("reserved %v", slices.Sorted(maps.Keys(reservedReports)))
	}
}
