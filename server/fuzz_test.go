package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/server/servertest"
)

// FuzzJSONRoutes posts arbitrary bodies to every short route, authenticated as the root owner:
// whatever the input, the API answers with a Connect error or a result, never a 500 or a panic.
// The seed corpus runs under plain `go test`; `go test -fuzz FuzzJSONRoutes ./server` explores.
func FuzzJSONRoutes(f *testing.F) {
	env := servertest.New(f)
	var routes []string
	for _, m := range mustRegistry(f).Methods() {
		routes = append(routes, m.Route())
	}
	seeds := []string{
		`{}`, ``, `null`, `[]`, `{"name":"acme"}`, `{"name":"` + strings.Repeat("a", 300) + `"}`,
		`{"id":"not-a-uuid"}`, `{"id":"00000000-0000-0000-0000-000000000000"}`,
		`{"kind":"PRINCIPAL_KIND_USER","name":"u","email":"u@example.com"}`, `{"kind":7,"name":"\u0000"}`,
		`{"pageSize":-5}`, `{"pageSize":2147483647,"pageToken":"!!"}`, `{"pageToken":"eyJhIjoxfQ"}`,
		`{"principalId":"00000000-0000-0000-0000-000000000000","role":"ROLE_OWNER"}`,
		`{"expireTime":"0001-01-01T00:00:00Z"}`, `{"expireTime":"not a time"}`, `{"startTime":"9999-12-31T23:59:59Z"}`,
		`{"role":99}`, `{"displayName":1}`, `{"unknownField":true}`, "\xff\xfe", `{"name":"` + "\u00e9" + `"}`,
	}
	for i, r := range routes {
		for j, s := range seeds {
			if (i+j)%3 == 0 { // a spread of pairs keeps the seed run short
				f.Add(r, []byte(s))
			}
		}
	}
	for _, m := range mustRegistry(f).Methods() {
		// A NUL in every common text field (PostgreSQL cannot store it), and other hostile text:
		// only the fields the method has, or the call is refused before it reaches them.
		in := m.Descriptor.Input()
		f.Add(m.Route(), ownFields(f, in, `{"type":"\u0000","subject":"a\u0000","description":"\u0000","method":"\u0000","name":"\u0000"}`))
		f.Add(m.Route(), ownFields(f, in, `{"name":"\u0001\u001b\u2028\"\\","labels":{"\u0000":"\u0001"}}`))
	}
	client := env.HTTPClient(env.AdminKey)
	f.Fuzz(func(t *testing.T, route string, body []byte) {
		if !strings.HasPrefix(route, "/") || strings.ContainsAny(route, " ?#%") {
			t.Skip()
		}
		req, err := http.NewRequest(http.MethodPost, env.URL+route, bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", route, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode >= 500 {
			t.Fatalf("POST %s %q = %d %s", route, body, res.StatusCode, b)
		}
	})
}

// ownFields is the JSON object obj with only the fields md has: JSON callers are held to the
// schema, so a seed naming another method's field would be refused before its hostile text is
// read.
func ownFields(tb testing.TB, md protoreflect.MessageDescriptor, obj string) []byte {
	tb.Helper()
	var all map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &all); err != nil {
		tb.Fatal(err)
	}
	for k := range all {
		if md.Fields().ByJSONName(k) == nil && md.Fields().ByTextName(k) == nil {
			delete(all, k)
		}
	}
	b, err := json.Marshal(all)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
