package server_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// unknownFieldAnswer is a refusal as a JSON caller reads it: status, code, message and the
// BadRequest's violations ("field: description", from the detail's value).
type unknownFieldAnswer struct {
	status     int
	code, msg  string
	violations []string
}

func readAnswer(t *testing.T, res *http.Response) unknownFieldAnswer {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var wire struct {
		Code, Message string
		Details       []struct{ Type, Value string }
	}
	if res.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &wire); err != nil {
			t.Fatalf("HTTP %d, body %s: %v", res.StatusCode, b, err)
		}
	}
	a := unknownFieldAnswer{status: res.StatusCode, code: wire.Code, msg: wire.Message}
	for _, d := range wire.Details {
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		var br errdetails.BadRequest
		if d.Type != "google.rpc.BadRequest" || err != nil || proto.Unmarshal(raw, &br) != nil {
			t.Fatalf("detail %s %q: %v", d.Type, d.Value, err)
		}
		for _, v := range br.GetFieldViolations() {
			a.violations = append(a.violations, v.GetField()+": "+v.GetDescription())
		}
	}
	return a
}

// TestJSONRefusesUnknownFields: a JSON call naming a field its request does not have is refused
// with invalid_argument naming the field, on the short route and the native path, by POST and by
// GET, and compressed; nothing is created. Binary protobuf callers stay forward-compatible: an
// unknown field number is ignored.
func TestJSONRefusesUnknownFields(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	capacitytest.Nodes(t, env.Pool, tenant, 1, capacitytest.NodeSpec{GPUs: 4, Model: "H100", CPUs: 64, MemoryBytes: 256 << 30, Labels: map[string]string{"gpu": "h100"}})
	httpClient := env.HTTPClient(env.AdminKey)
	created, err := poolsv1connect.NewPoolsServiceClient(httpClient, env.URL).Create(t.Context(), &poolsv1.CreateRequest{Name: "h100", NodeSelector: map[string]string{"gpu": "h100"}})
	if err != nil {
		t.Fatal(err)
	}
	pool := created.GetPool().GetId()
	leaseCount := func() int {
		t.Helper()
		var n int
		if err := env.Pool.QueryRow(t.Context(), `SELECT count(*) FROM pool_leases`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	post := func(path string, body []byte, header map[string]string) unknownFieldAnswer {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, env.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		res, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return readAnswer(t, res)
	}
	const unknown = "unknown field: the request has no such field (check its spelling against the API reference)"
	misspelt := `{"poolId":"` + pool + `","gpuss":2,"gpus":1,"duration":"3600s"}`
	for _, tc := range []struct {
		name, path, body string
		want             []string
	}{
		{"short route", "/leases/create", misspelt, []string{"gpuss: " + unknown}},
		{"native path", leasesv1connect.LeasesServiceCreateProcedure, misspelt, []string{"gpuss: " + unknown}},
		{"the brief's", "/leases/create", `{"poolId":"` + pool + `","gpuss":2}`, []string{"gpuss: " + unknown}},
		{"nested, and several", "/leases/create", `{"poolId":"` + pool + `","gpus":1,"duration":"3600s","tolerations":[{"key":"k","operator":"Exists"},{"key":"k","operatr":"Exists"}],"priorty":3}`,
			[]string{"priorty: " + unknown, "tolerations[1].operatr: " + unknown}},
	} {
		a := post(tc.path, []byte(tc.body), nil)
		if a.status != http.StatusBadRequest || a.code != "invalid_argument" || !slices.Equal(a.violations, tc.want) {
			t.Errorf("%s: HTTP %d %s %q, violations %q; want 400 invalid_argument %q", tc.name, a.status, a.code, a.msg, a.violations, tc.want)
		}
	}

	// Compressed, Connect's codec refuses it: the message names the field.
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write([]byte(misspelt))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if a := post("/leases/create", gz.Bytes(), map[string]string{"Content-Encoding": "gzip"}); a.status != http.StatusBadRequest || a.code != "invalid_argument" || !strings.Contains(a.msg, `"gpuss"`) {
		t.Errorf("gzip: HTTP %d %s %q, want 400 invalid_argument naming gpuss", a.status, a.code, a.msg)
	}

	// By GET, with the message as a query parameter, plain and in base64.
	for _, q := range []url.Values{
		{"encoding": {"json"}, "message": {`{"pageSise":1}`}},
		{"encoding": {"json"}, "base64": {"1"}, "message": {base64.RawURLEncoding.EncodeToString([]byte(`{"pageSise":1}`))}},
	} {
		res, err := httpClient.Get(env.URL + "/leases/list?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if a := readAnswer(t, res); a.status != http.StatusBadRequest || !slices.Equal(a.violations, []string{"pageSise: " + unknown}) {
			t.Errorf("GET %v: HTTP %d %s %q %q, want 400 naming pageSise", q, a.status, a.code, a.msg, a.violations)
		}
	}
	if n := leaseCount(); n != 0 {
		t.Fatalf("%d leases created by refused calls", n)
	}

	// Spelt right, the same call creates the lease: by JSON name and by proto name.
	for _, body := range []string{
		`{"poolId":"` + pool + `","gpus":1,"duration":"3600s"}`,
		`{"pool_id":"` + pool + `","gpus":1,"duration":"3600s","tolerations":[{"key":"k","operator":"Exists"}]}`,
	} {
		if a := post("/leases/create", []byte(body), nil); a.status != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s %q", body, a.status, a.code, a.msg)
		}
	}

	// Binary protobuf with a field number the server does not know: accepted, as a newer client's.
	req := &leasesv1.CreateRequest{PoolId: pool, Gpus: 1, Duration: durationpb.New(3600e9)}
	req.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 2))
	if _, err := leasesv1connect.NewLeasesServiceClient(httpClient, env.URL).Create(t.Context(), req); err != nil {
		t.Fatalf("binary protobuf with an unknown field: %v", err)
	}
	if _, err := leasesv1connect.NewLeasesServiceClient(httpClient, env.URL, connect.WithProtoJSON()).Create(t.Context(), req); err != nil {
		t.Fatalf("a Connect client's JSON (unknown fields are not written): %v", err)
	}
	if n := leaseCount(); n != 4 {
		t.Fatalf("%d leases, want 4", n)
	}
}
