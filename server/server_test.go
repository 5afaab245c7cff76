package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	systemv1 "github.com/better-compute/better-compute/gen/go/bettercompute/system/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/system/v1/systemv1connect"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// newTestServer serves the API over real HTTP/1.1 and h2c on a loopback port.
func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	return servertest.New(t).Server
}

// h2cClient speaks HTTP/2 without TLS, as gRPC clients behind a TLS terminator do.
func h2cClient() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

func TestInfoThroughGeneratedClient(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for name, c := range map[string]systemv1connect.SystemServiceClient{
		"connect+proto": systemv1connect.NewSystemServiceClient(ts.Client(), ts.URL+"/api"),
		"connect+json":  systemv1connect.NewSystemServiceClient(ts.Client(), ts.URL+"/api", connect.WithProtoJSON()),
		"grpc (h2c)":    systemv1connect.NewSystemServiceClient(h2cClient(), ts.URL+"/api", connect.WithGRPC()),
		"grpc-web":      systemv1connect.NewSystemServiceClient(ts.Client(), ts.URL+"/api", connect.WithGRPCWeb()),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, err := c.Info(t.Context(), &systemv1.InfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if res.GetVersion() == "" || res.GetBuild() == "" {
				t.Errorf("Info = %v: want version and build", res)
			}
			if skew := time.Since(res.GetServerTime().AsTime()); skew < -time.Minute || skew > time.Minute {
				t.Errorf("server_time is %v away from the test's clock", skew)
			}
		})
	}
}

func TestShortRouteJSON(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	res, err := http.Post(ts.URL+"/api/system/info", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /api/system/info = %d %s", res.StatusCode, body)
	}
	var got struct {
		Version    string `json:"version"`
		ServerTime string `json:"serverTime"`
	}
	if err := json.Unmarshal(body, &got); err != nil || got.Version == "" || got.ServerTime == "" {
		t.Fatalf("body %s: %v", body, err)
	}

	res, err = http.Post(ts.URL+"/api/system/nope", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("POST /api/system/nope = %d, want 404", res.StatusCode)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		res, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d", path, res.StatusCode)
		}
	}
}
