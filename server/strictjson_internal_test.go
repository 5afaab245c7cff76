package server

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
)

// TestUnknownJSONFields: the walk names unknown fields with their paths, by JSON or proto name,
// through lists and nulls, skips the well-known types' own forms, caps what it names, and names
// nothing in what is not JSON (the codec refuses that).
func TestUnknownJSONFields(t *testing.T) {
	t.Parallel()
	md := (&leasesv1.CreateRequest{}).ProtoReflect().Descriptor()
	many := make([]string, 30)
	for i := range many {
		many[i] = fmt.Sprintf(`"x%02d":1`, i)
	}
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"poolId":"p","gpuss":2}`, []string{"gpuss"}},
		{`{"pool_id":"p","gpu_model":"H100","duration":"60s"}`, nil},
		{`{"tolerations":[{"key":"k"},null,{"operatr":"Exists","x":{"y":[1,{"z":2}]}}]}`, []string{"tolerations[2].operatr", "tolerations[2].x"}},
		{`{"tolerations":null,"duration":{"seconds":1,"whatever":2},"[ext.field]":1}`, nil},
		{`{"tolerations":{"a":1},"gpus":[1,2]}`, nil},
		{`{` + strings.Join(many, ",") + `}`, many[:maxUnknownNamed]},
		{`{"gpuss":2`, nil},
		{`not json`, nil},
		{``, nil},
	} {
		want := make([]string, len(tc.want))
		for i, w := range tc.want {
			want[i] = strings.Trim(strings.SplitN(w, ":", 2)[0], `"`)
		}
		if got := unknownJSONFields(md, []byte(tc.body)); !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
			t.Errorf("%s: %q, want %q", tc.body, got, want)
		}
	}
}
