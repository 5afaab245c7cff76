package server_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	reservationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1/reservationsv1connect"
	"github.com/better-compute/better-compute/server/servertest"
)

// fieldViolations renders a BadRequest's violations as "field: description".
func fieldViolations(br *errdetails.BadRequest) []string {
	var out []string
	for _, v := range br.GetFieldViolations() {
		out = append(out, v.GetField()+": "+v.GetDescription())
	}
	return out
}

// TestInvalidArgumentCarriesFieldViolations checks, from outside, that a refused field reaches
// callers as a google.rpc.BadRequest detail, on the short JSON route (as curl sees it, with the
// detail readable in "debug") and through a generated Connect client (binary protobuf), and that
// a request with several bad fields names them all.
func TestInvalidArgumentCarriesFieldViolations(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	httpClient := env.HTTPClient(env.AdminKey)
	oneBad := []string{`id: must be a UUID, got "nope"`}
	threeBad := []string{`pool_id: must be a UUID, got ""`, "start_time: is required", "end_time: is required"}

	t.Run("JSON route", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			route, body string
			want        []string
		}{
			{"/nodes/get", `{"id":"nope"}`, oneBad},
			{"/reservations/create", `{}`, threeBad},
		} {
			res, err := httpClient.Post(env.URL+tc.route, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(res.Body)
			res.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			var wire struct {
				Code, Message string
				Details       []struct {
					Type, Value string
					Debug       struct {
						FieldViolations []struct{ Field, Description string }
					}
				}
			}
			if err := json.Unmarshal(b, &wire); err != nil || res.StatusCode != http.StatusBadRequest || wire.Code != "invalid_argument" {
				t.Fatalf("POST %s: %d %s (%v), want 400 invalid_argument", tc.route, res.StatusCode, b, err)
			}
			if want := strings.Join(tc.want, "; "); wire.Message != want {
				t.Errorf("POST %s: message %q, want %q", tc.route, wire.Message, want)
			}
			if len(wire.Details) != 1 || wire.Details[0].Type != "google.rpc.BadRequest" {
				t.Fatalf("POST %s: details %s, want one google.rpc.BadRequest", tc.route, b)
			}
			raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(wire.Details[0].Value, "="))
			var br errdetails.BadRequest
			if err != nil || proto.Unmarshal(raw, &br) != nil {
				t.Fatalf("POST %s: detail value %q does not decode: %v", tc.route, wire.Details[0].Value, err)
			}
			if got := fieldViolations(&br); !slices.Equal(got, tc.want) {
				t.Errorf("POST %s: violations %q, want %q", tc.route, got, tc.want)
			}
			var debug []string
			for _, v := range wire.Details[0].Debug.FieldViolations {
				debug = append(debug, v.Field+": "+v.Description)
			}
			if !slices.Equal(debug, tc.want) {
				t.Errorf("POST %s: debug violations %q, want %q", tc.route, debug, tc.want)
			}
		}
	})

	t.Run("native Connect", func(t *testing.T) {
		t.Parallel()
		check := func(what string, err error, want []string) {
			t.Helper()
			var cerr *connect.Error
			if !errors.As(err, &cerr) || cerr.Code() != connect.CodeInvalidArgument {
				t.Fatalf("%s: %v, want invalid_argument", what, err)
			}
			var got []string
			for _, d := range cerr.Details() {
				v, err := d.Value()
				br, ok := v.(*errdetails.BadRequest)
				if err != nil || !ok {
					t.Fatalf("%s: detail %s (%v), want google.rpc.BadRequest", what, d.Type(), err)
				}
				got = append(got, fieldViolations(br)...)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: violations %q, want %q", what, got, want)
			}
		}
		_, err := nodesv1connect.NewNodesServiceClient(httpClient, env.URL).Get(t.Context(), &nodesv1.GetRequest{Id: "nope"})
		check("nodes/get", err, oneBad)
		_, err = reservationsv1connect.NewReservationsServiceClient(httpClient, env.URL).Create(t.Context(), &reservationsv1.CreateRequest{})
		check("reservations/create", err, threeBad)
	})
}
