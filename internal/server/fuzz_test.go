package server_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/server/servertest"
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
	for _, r := range routes {
		// A NUL in every common text field (PostgreSQL cannot store it), and other hostile text.
		f.Add(r, []byte(`{"type":"\u0000","subject":"a\u0000","description":"\u0000","method":"\u0000","name":"\u0000"}`))
		f.Add(r, []byte(`{"name":"\u0001\u001b\u2028\"\\","labels":{"\u0000":"\u0001"}}`))
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
