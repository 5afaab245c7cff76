package host_test

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon/host"
)

// The fixtures in testdata/dcgmi-diag are constructed from DCGM's documented JSON (see its
// README): pass-level1 and fail-level2 follow DCGM 2.x/3.x, warn-skip-level2 DCGM 4.x.

func diagnoseCmd(level int32) *daemonv1.Command {
	return &daemonv1.Command{Id: "d1", Payload: &daemonv1.Command_Diagnose{Diagnose: &daemonv1.DiagnosePayload{Level: level}}}
}

// fakeDcgmi writes a dcgmi that checks it was asked for diag -r level -j, prints the fixture
// and exits with exit.
func fakeDcgmi(t *testing.T, level, fixture string, exit string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "dcgmi-diag", fixture))
	if err != nil {
		t.Fatal(err)
	}
	return fakeProgram(t, `[ "$*" = "diag -r `+level+` -j" ] || { echo "bad args $*" >&2; exit 2; }
cat `+path+`
exit `+exit+"\n")
}

func diagnoseResult(t *testing.T, out *structpb.Struct) *daemonv1.DiagnoseResult {
	t.Helper()
	data, err := out.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	res := &daemonv1.DiagnoseResult{}
	if err := protojson.Unmarshal(data, res); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return res
}

func TestDiagnoseUnavailable(t *testing.T) { //nolint:paralleltest // it sets PATH
	for _, dcgmi := range []string{"-", ""} {
		c := &host.Commands{Dcgmi: dcgmi}
		if dcgmi == "" {
			t.Setenv("PATH", t.TempDir()) // no dcgmi on PATH
		}
		out, err := c.Handlers()[host.CommandDiagnose](t.Context(), diagnoseCmd(0))
		if err != nil {
			t.Fatalf("%q: %v", dcgmi, err)
		}
		if r := diagnoseResult(t, out); r.GetResult() != "unavailable" || r.GetLevel() != 2 || len(r.GetTests()) != 0 {
			t.Errorf("%q: %v; want unavailable at level 2", dcgmi, r)
		}
	}
}

func TestDiagnosePass(t *testing.T) {
	t.Parallel()
	c := &host.Commands{Dcgmi: fakeDcgmi(t, "1", "pass-level1-dcgm3.json", "0"), Drain: &memDrain{on: true}}
	out, err := c.Handlers()[host.CommandDiagnose](t.Context(), diagnoseCmd(1))
	if err != nil {
		t.Fatal(err)
	}
	r := diagnoseResult(t, out)
	if r.GetResult() != "pass" || r.GetLevel() != 1 || r.GetDcgmVersion() != "3.3.5" || len(r.GetTests()) != 9 {
		t.Fatalf("%v", r)
	}
	for _, tc := range r.GetTests() {
		if tc.GetResult() != "pass" || len(tc.GetGpuIndexes()) != 0 || tc.GetInfo() != "" {
			t.Errorf("test %v", tc)
		}
	}
}

func TestDiagnoseFail(t *testing.T) {
	t.Parallel()
	// dcgmi exits non-zero on a failing test, its JSON printed all the same.
	c := &host.Commands{Dcgmi: fakeDcgmi(t, "2", "fail-level2-dcgm3.json", "226")}
	out, err := c.Handlers()[host.CommandDiagnose](t.Context(), diagnoseCmd(0))
	if err == nil || !strings.Contains(err.Error(), "GPU Memory on GPU 3") || !strings.Contains(err.Error(), "cudaMalloc") {
		t.Fatalf("error %v; want the failing memory test on GPU 3 named", err)
	}
	r := diagnoseResult(t, out)
	if r.GetResult() != "fail" || r.GetLevel() != 2 || len(r.GetTests()) != 5 {
		t.Fatalf("%v", r)
	}
	var failed []string
	for _, tc := range r.GetTests() {
		if tc.GetResult() == "fail" {
			failed = append(failed, tc.GetName())
			if g := tc.GetGpuIndexes(); len(g) != 1 || g[0] != 3 || !strings.HasPrefix(tc.GetInfo(), "GPU 3: Error using CUDA API") ||
				!strings.Contains(tc.GetInfo(), "Allocated 0 bytes") {
				t.Errorf("failing test %v", tc)
			}
		}
	}
	if len(failed) != 1 || failed[0] != "GPU Memory" {
		t.Errorf("failed tests %v", failed)
	}
}

func TestDiagnoseWarnSkipDCGM4(t *testing.T) {
	t.Parallel()
	c := &host.Commands{Dcgmi: fakeDcgmi(t, "2", "warn-skip-level2-dcgm4.json", "0")}
	out, err := c.Handlers()[host.CommandDiagnose](t.Context(), diagnoseCmd(2))
	if err != nil {
		t.Fatal(err)
	}
	r := diagnoseResult(t, out)
	if r.GetResult() != "pass" || r.GetDcgmVersion() != "4.2.3" || len(r.GetTests()) != 3 {
		t.Fatalf("%v", r)
	}
	want := map[string]string{"software": "pass", "pcie": "warn", "memory": "skip"}
	for _, tc := range r.GetTests() {
		if want[tc.GetName()] != tc.GetResult() {
			t.Errorf("%s: %s, want %s", tc.GetName(), tc.GetResult(), want[tc.GetName()])
		}
	}
	if pcie := r.GetTests()[1]; len(pcie.GetGpuIndexes()) != 1 || pcie.GetGpuIndexes()[0] != 1 || !strings.Contains(pcie.GetInfo(), "link width x8") {
		t.Errorf("pcie %v", pcie)
	}
	if mem := r.GetTests()[2]; !strings.Contains(mem.GetInfo(), "GPU 0: Test skipped: ECC is not enabled") {
		t.Errorf("memory %v", mem)
	}
}

func TestDiagnoseBounds(t *testing.T) {
	t.Parallel()
	// 100 tests, the last one failing with a long message: 64 kept, the failure among them, its
	// info cut to 1 KiB.
	var b strings.Builder
	b.WriteString(`{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Custom", "tests": [`)
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		status := "Pass"
		if i == 99 {
			status = "Fail"
		}
		b.WriteString(`{"name": "t` + string(rune('A'+i%26)) + `", "results": [{"gpu_ids": "0", "status": "` + status + `", "info": ["` + strings.Repeat("é", 2000) + `"]}]}`)
	}
	b.WriteString(`]}]}}`)
	r, err := host.ParseDcgmiDiag([]byte("WARNING: a line before the JSON\n" + b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.GetTests()) != host.MaxDiagnoseTests || r.GetResult() != "fail" || r.GetTests()[0].GetResult() != "fail" {
		t.Fatalf("%d tests, result %s, first %v", len(r.GetTests()), r.GetResult(), r.GetTests()[0].GetResult())
	}
	if info := r.GetTests()[0].GetInfo(); len(info) > host.MaxDiagnoseInfo || len(info) < host.MaxDiagnoseInfo-2 || !strings.HasSuffix(info, "é") {
		t.Errorf("info of %d bytes", len(info))
	}
	// Unreadable output, and an exit with none, fail the command with dcgmi's message.
	c := &host.Commands{Dcgmi: fakeProgram(t, "echo 'Error: unable to establish a connection to the host engine' >&2; exit 1\n")}
	if _, err := c.Handlers()[host.CommandDiagnose](t.Context(), diagnoseCmd(1)); err == nil || !strings.Contains(err.Error(), "host engine") {
		t.Errorf("no host engine: %v", err)
	}
	for _, doc := range []string{"", "{}", `{"DCGM Diagnostic": {"runtime_error": "no GPUs to test"}}`} {
		if _, err := host.ParseDcgmiDiag([]byte(doc)); err == nil {
			t.Errorf("%q parsed", doc)
		}
	}
}
