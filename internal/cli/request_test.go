package cli

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/encoding/protojson"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	secretsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1"
	"github.com/better-compute/better-compute/internal/apispec"
)

func build(t *testing.T, rf *requestFlags, args ...string) (string, error) {
	t.Helper()
	docs, err := apispec.LoadDocs()
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	rf.add(fs, docs)
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	m, err := rf.build(fs, strings.NewReader(""))
	if err != nil {
		return "", err
	}
	b, err := protojson.Marshal(m)
	return string(b), err
}

func TestRequestFlags(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		rf   *requestFlags
		args []string
		want string
	}{
		{&requestFlags{md: (&leasesv1.CreateRequest{}).ProtoReflect().Descriptor()},
			[]string{"--pool-id", "p", "--gpus", "2", "--memory-bytes", "17179869184", "--duration", "1h30m", "--spread"},
			`{"poolId":"p","gpus":2,"memoryBytes":"17179869184","duration":"5400s","spread":true}`},
		{&requestFlags{md: (&leasesv1.CreateRequest{}).ProtoReflect().Descriptor()},
			[]string{"--data", `{"poolId":"from-data","gpus":1,"tolerations":[{"key":"k"}]}`, "--gpus", "4"},
			`{"poolId":"from-data","gpus":4,"tolerations":[{"key":"k"}]}`},
		{&requestFlags{md: (&iamv1.CreatePrincipalRequest{}).ProtoReflect().Descriptor()},
			[]string{"--kind", "service-account", "--name", "bot"},
			`{"kind":"PRINCIPAL_KIND_SERVICE_ACCOUNT","name":"bot"}`},
		{&requestFlags{md: (&iamv1.CreatePrincipalRequest{}).ProtoReflect().Descriptor()},
			[]string{"--kind", "PRINCIPAL_KIND_USER"},
			`{"kind":"PRINCIPAL_KIND_USER"}`},
		{&requestFlags{md: (&iamv1.CreateApiKeyRequest{}).ProtoReflect().Descriptor()},
			[]string{"--expire-time", "2030-01-02T03:04:05+01:00"},
			`{"expireTime":"2030-01-02T02:04:05Z"}`},
		{&requestFlags{md: (&nodesv1.ListRequest{}).ProtoReflect().Descriptor()},
			[]string{"--states", "ready,draining", "--states", "cordoned", "--label-selector", "gpu=a100,zone=b"},
			`{"labelSelector":{"gpu":"a100","zone":"b"},"states":["ready","draining","cordoned"]}`},
		{&requestFlags{md: (&secretsv1.CreateRequest{}).ProtoReflect().Descriptor()},
			[]string{"--name", "n", "--value", "@" + secret},
			`{"name":"n","value":"` + base64.StdEncoding.EncodeToString([]byte("s3cr3t")) + `"}`},
	} {
		got, err := build(t, tc.rf, tc.args...)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if strings.ReplaceAll(got, " ", "") != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.args, got, tc.want)
		}
	}
	for _, args := range [][]string{
		{"--gpus", "two"},
		{"--duration", "forever"},
		{"--data", `{"gpu": 1}`},
		{"--data", `[1]`},
	} {
		if _, err := build(t, &requestFlags{md: (&leasesv1.CreateRequest{}).ProtoReflect().Descriptor()}, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	if _, err := build(t, &requestFlags{md: (&iamv1.CreatePrincipalRequest{}).ProtoReflect().Descriptor()}, "--kind", "robot"); err == nil || !strings.Contains(err.Error(), "service_account") {
		t.Errorf("unknown enum value: %v", err)
	}
}
