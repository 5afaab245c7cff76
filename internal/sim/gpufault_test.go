package sim_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/sim"
)

// testRootPEM is a self-signed CA, enough for sim.New (which parses it; nothing dials here).
func testRootPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sim test root"}, IsCA: true, BasicConstraintsValid: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// unstartedFleet is a fleet that never runs: its machines have inventories and no daemons.
func unstartedFleet(t *testing.T, n int, seed uint64, rate float64) *sim.Fleet {
	t.Helper()
	f, err := sim.New(sim.Options{Gateway: "127.0.0.1:1", RootPEM: testRootPEM(t), Token: "t", N: n, Seed: seed, GPUFaultRate: rate})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestGPUFaultPlanIsDeterministic(t *testing.T) {
	t.Parallel()
	const n, rate = 200, 0.05
	a := unstartedFleet(t, n, 11, rate).GPUFaultPlan(10 * time.Hour)
	if b := unstartedFleet(t, n, 11, rate).GPUFaultPlan(10 * time.Hour); !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed plans different GPU faults")
	}
	if b := unstartedFleet(t, n, 12, rate).GPUFaultPlan(10 * time.Hour); reflect.DeepEqual(a, b) {
		t.Error("two seeds plan the same GPU faults")
	}
	if p := unstartedFleet(t, n, 11, 0).GPUFaultPlan(10 * time.Hour); len(p) != 0 {
		t.Errorf("%d faults at rate 0", len(p))
	}

	// About rate × GPUs × hours faults, on GPUs the machines have, mostly application Xids.
	f := unstartedFleet(t, n, 11, rate)
	gpus := 0
	for i := range n {
		gpus += len(f.Machine(i).Inventory.GetGpus())
	}
	want := rate * float64(gpus) * 10
	if got := float64(len(a)); got < want*0.7 || got > want*1.3 {
		t.Errorf("%v faults in 10h over %d GPUs at %v/h, want about %v", got, gpus, rate, want)
	}
	kinds := map[string]int{}
	for i, fault := range a {
		if i > 0 && fault.At < a[i-1].At {
			t.Fatalf("fault %d is before the one before it", i)
		}
		inv := f.Machine(hostIndex(t, fault.Hostname)).Inventory
		if fault.GPU < 0 || fault.GPU >= len(inv.GetGpus()) {
			t.Fatalf("fault %+v: the machine has %d GPUs", fault, len(inv.GetGpus()))
		}
		switch {
		case fault.Check == gpuhealth.CheckXid && (fault.Code == 13 || fault.Code == 31 || fault.Code == 43):
			kinds["application"]++
		case fault.Check == gpuhealth.CheckThermalSlowdown:
			kinds[fault.Check]++
			if fault.For <= 0 || fault.Code != 0 {
				t.Errorf("thermal slowdown %+v", fault)
			}
		default:
			kinds[fault.Check]++
		}
	}
	if kinds["application"] < len(a)/2 || kinds[gpuhealth.CheckRowRemapPending] == 0 || kinds[gpuhealth.CheckThermalSlowdown] == 0 {
		t.Errorf("mix %v of %d faults", kinds, len(a))
	}
}

// hostIndex is the index of a machine named "sim-0001" and up.
func hostIndex(t *testing.T, host string) int {
	t.Helper()
	for i := range 10000 {
		if sim.Hostname("sim", i) == host {
			return i
		}
	}
	t.Fatalf("no machine %s", host)
	return 0
}

// TestControlSocketRefusesBadRequests: the control socket is its owner's only, and a bad
// request is answered with its field named; the fleet here never runs.
func TestControlSocketRefusesBadRequests(t *testing.T) {
	t.Parallel()
	f := unstartedFleet(t, 2, 1, 0)
	path := filepath.Join(t.TempDir(), "ctl", "sim.sock")
	ctx, cancel := context.WithCancel(t.Context())
	done, err := sim.StartControl(ctx, path, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v", st.Mode())
	}
	if _, err := sim.ListenControl(path); err == nil {
		t.Error("a second simulator listens on the same socket")
	}

	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	t.Cleanup(hc.CloseIdleConnections)
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"not JSON", `{`, 400, "body: "},
		{"unknown field", `{"hostname":"sim-0001","gpu":1,"check":"xid","code":79,"xid":79}`, 400, "body: "},
		{"wrong type", `{"hostname":"sim-0001","gpu":"one","check":"xid"}`, 400, "gpu: "},
		{"no hostname", `{"gpu":1,"check":"xid","code":79}`, 400, "hostname: required"},
		{"no check", `{"hostname":"sim-0001","gpu":1}`, 400, "check: required"},
		{"unknown check", `{"hostname":"sim-0001","gpu":1,"check":"xyz"}`, 400, `check: unknown check "xyz"`},
		{"no gpu", `{"hostname":"sim-0001","check":"xid","code":79}`, 400, "gpu: required"},
		{"negative count", `{"hostname":"sim-0001","gpu":1,"check":"xid","count":-2}`, 400, "count: "},
		{"long detail", `{"hostname":"sim-0001","gpu":1,"check":"xid","detail":"` + strings.Repeat("x", 600) + `"}`, 400, "detail: "},
		{"too big", `{"hostname":"` + strings.Repeat("x", sim.MaxControlBody) + `"}`, 413, "body: larger than"},
		{"unknown host", `{"hostname":"sim-0099","gpu":1,"check":"xid","code":79}`, 404, "hostname: "},
		{"not started", `{"hostname":"sim-0001","gpu":1,"check":"xid","code":79}`, 409, "hostname: "},
	} {
		res, err := hc.Post("http://sim"+sim.ControlInjectPath, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		var e sim.ControlError
		decodeErr := jsonDecode(res, &e)
		if res.StatusCode != tc.status || decodeErr != nil || !strings.HasPrefix(e.Error, tc.want) {
			t.Errorf("%s: %d %q (%v), want %d %q…", tc.name, res.StatusCode, e.Error, decodeErr, tc.status, tc.want)
		}
	}

	// The client reports the server's words.
	_, err = sim.NewControlClient(path).Clear(t.Context(), "nope")
	if err == nil || !strings.Contains(err.Error(), "hostname: ") {
		t.Errorf("clear of an unknown host: %v", err)
	}
	if _, err := sim.NewControlClient(filepath.Join(t.TempDir(), "none.sock")).Health(t.Context(), "sim-0001"); err == nil || !strings.Contains(err.Error(), "is `better-compute sim --control`") {
		t.Errorf("no socket: %v", err)
	}

	cancel()
	<-done
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left after the simulator stopped: %v", err)
	}
}

func jsonDecode(res *http.Response, v any) error {
	defer res.Body.Close()
	return json.NewDecoder(res.Body).Decode(v)
}
