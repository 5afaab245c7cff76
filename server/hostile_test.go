package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/better-compute/better-compute/server/servertest"
)

// hostileText are strings a caller controls: control characters, a line separator, quotes and
// backslashes, a JSON escape spelled out, and a long string.
var hostileText = []string{"a\x01b", "\x1b[2J", "\u2028\u2029", `"\`, `\u0000`, strings.Repeat("é\"\\", 3000)}

// TestHostileStringsInEveryField puts hostile strings in every string a caller controls, in every
// method: fields, list items, map keys and values (labels, selectors) and Struct payloads. A NUL
// is refused with InvalidArgument naming the field (PostgreSQL cannot store it); anything else is
// refused with a 4xx or accepted, and what is answered is valid JSON. Invalid UTF-8, which a
// protobuf string cannot hold, is refused as InvalidArgument.
func TestHostileStringsInEveryField(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	client := env.HTTPClient(env.AdminKey)
	post := func(route string, body []byte) (int, string) {
		t.Helper()
		res, err := client.Post(env.URL+route, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", route, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 500 {
			t.Errorf("POST %s %.200s = %d %s", route, body, res.StatusCode, b)
		} else if !json.Valid(b) {
			t.Errorf("POST %s %.200s answered invalid JSON: %.200s", route, body, b)
		}
		return res.StatusCode, string(b)
	}
	for _, m := range mustRegistry(t).Methods() {
		fields := m.Descriptor.Input().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			for _, s := range append([]string{"a\x00b"}, hostileText...) {
				body, field, ok := requestWith(m.Descriptor.Input(), fd, s)
				if !ok {
					continue
				}
				code, answer := post(m.Route(), body)
				if strings.Contains(s, "\x00") {
					var e struct{ Code, Message string }
					_ = json.Unmarshal([]byte(answer), &e)
					if code != http.StatusBadRequest || e.Code != "invalid_argument" || !strings.HasPrefix(e.Message, field) {
						t.Errorf("POST %s with a NUL in %s = %d %s, want invalid_argument naming %s", m.Route(), field, code, answer, field)
					}
				}
			}
			// Invalid UTF-8 in the field, raw in the JSON.
			if fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap() {
				body := []byte(`{"` + fd.JSONName() + "\":\"\xff\xfe\"}")
				if code, answer := post(m.Route(), body); code != http.StatusBadRequest || !strings.Contains(answer, "invalid_argument") {
					t.Errorf("POST %s with invalid UTF-8 in %s = %d %s, want invalid_argument", m.Route(), fd.Name(), code, answer)
				}
			}
		}
	}
}

// requestWith is a JSON request of type md with s in field fd, and the field's name as an error
// would give it; ok is false when fd holds no caller text.
func requestWith(md protoreflect.MessageDescriptor, fd protoreflect.FieldDescriptor, s string) (body []byte, field string, ok bool) {
	msg := dynamicpb.NewMessage(md)
	name := string(fd.Name())
	switch {
	case fd.IsMap() && fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.StringKind:
		msg.Mutable(fd).Map().Set(protoreflect.ValueOfString("k").MapKey(), protoreflect.ValueOfString(s))
		field = fmt.Sprintf("%s[%q]", name, "k")
	case fd.IsList() && fd.Kind() == protoreflect.StringKind:
		msg.Mutable(fd).List().Append(protoreflect.ValueOfString(s))
		field = name + "[0]"
	case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.StringKind:
		msg.Set(fd, protoreflect.ValueOfString(s))
		field = name
	case !fd.IsList() && fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == "google.protobuf.Struct":
		b, _ := json.Marshal(map[string]any{fd.JSONName(): map[string]any{"k": []any{s}}})
		return b, fmt.Sprintf("%s[%q][0]", name, "k"), true
	default:
		return nil, "", false
	}
	b, err := protojson.Marshal(msg)
	return b, field, err == nil
}
