package host

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// The bounds of a diagnose command (docs/gpus.md).
const (
	// MaxDiagnoseTests is the most tests a DiagnoseResult carries; failing tests are kept first
	// when DCGM reports more.
	MaxDiagnoseTests = 64
	// MaxDiagnoseInfo is the most bytes of a test's info.
	MaxDiagnoseInfo = 1 << 10
	// DcgmiMaxOutput is the most bytes dcgmi diag -j may print: a level 4 run on 8 GPUs prints
	// well under 1 MiB.
	DcgmiMaxOutput = 4 << 20
	// defaultDiagnoseLevel is the level of a payload's 0.
	defaultDiagnoseLevel = 2
)

// Diagnose results (DiagnoseResult.result).
const (
	DiagnosePass        = "pass"
	DiagnoseFail        = "fail"
	DiagnoseUnavailable = "unavailable"
)

// DiagnoseTimeout is how long dcgmi diag -r level may run before it is killed: DCGM's own
// estimates of each level (seconds to minutes for 1, minutes for 2, about half an hour for 3,
// hours for 4) with a margin. The command's deadline bounds it too.
func DiagnoseTimeout(level int32) time.Duration {
	switch level {
	case 1:
		return 2 * time.Minute
	case 3:
		return 45 * time.Minute
	case 4:
		return 3 * time.Hour
	}
	return 10 * time.Minute
}

// dcgmiProgram is the dcgmi to run: Dcgmi, or the one on PATH; empty for none.
func (c *Commands) dcgmiProgram() string {
	switch c.Dcgmi {
	case "-":
		return ""
	case "":
		p, err := exec.LookPath("dcgmi")
		if err != nil {
			return ""
		}
		return p
	}
	return c.Dcgmi
}

// diagnose runs DCGM's diagnostics (dcgmi diag -r LEVEL -j) and returns their DiagnoseResult. A
// node without DCGM succeeds with the result "unavailable"; a failing test fails the command,
// with the DiagnoseResult attached (as exec attaches its output to a non-zero exit) and an
// error that names the failing tests.
func (c *Commands) diagnose(ctx context.Context, cmd *daemonv1.Command) (*structpb.Struct, error) {
	level := cmd.GetDiagnose().GetLevel()
	if level == 0 {
		level = defaultDiagnoseLevel
	}
	prog := c.dcgmiProgram()
	if prog == "" {
		return toStruct(&daemonv1.DiagnoseResult{Result: DiagnoseUnavailable, Level: level})
	}
	args := []string{"diag", "-r", strconv.Itoa(int(level)), "-j"}
	invocation := prog + " " + strings.Join(args, " ")
	c.logger().Info("diagnose: running DCGM's diagnostics", "level", level)
	run := runBounded(ctx, prog, args, DiagnoseTimeout(level), DcgmiMaxOutput)
	switch {
	case run.over:
		return nil, fmt.Errorf("diagnose: %s: output over %d bytes, refused", invocation, DcgmiMaxOutput)
	case run.timedOut:
		return nil, fmt.Errorf("diagnose: %s: killed after %v: %w", invocation, run.took.Round(time.Second), context.DeadlineExceeded)
	}
	// dcgmi exits non-zero when a test fails, with its JSON printed all the same.
	res, perr := ParseDcgmiDiag(run.stdout)
	if perr != nil {
		if run.err != nil {
			return nil, fmt.Errorf("diagnose: %s: %w: %s", invocation, run.err, run.message())
		}
		return nil, fmt.Errorf("diagnose: %s: %w", invocation, perr)
	}
	res.Level = level
	out, err := toStruct(res)
	if err != nil {
		return nil, fmt.Errorf("diagnose: encode the result: %w", err)
	}
	if res.GetResult() == DiagnoseFail {
		return out, fmt.Errorf("diagnose level %d: %s", level, failureSummary(res))
	}
	return out, nil
}

// failureSummary names the failing tests of res and the GPUs they failed on.
func failureSummary(res *daemonv1.DiagnoseResult) string {
	var parts []string
	for _, t := range res.GetTests() {
		if t.GetResult() != DiagnoseFail {
			continue
		}
		p := t.GetName()
		if len(t.GetGpuIndexes()) > 0 {
			var ids []string
			for _, i := range t.GetGpuIndexes() {
				ids = append(ids, strconv.Itoa(int(i)))
			}
			p += " on GPU " + strings.Join(ids, ", ")
		}
		if info := firstLine(t.GetInfo()); info != "" {
			p += " (" + truncateUTF8(info, 160) + ")"
		}
		parts = append(parts, p)
	}
	return "failed: " + strings.Join(parts, "; ")
}

// dcgmDiagJSON is what ParseDcgmiDiag reads of dcgmi diag -j. Two shapes are known:
//
//   - DCGM 2.x and 3.x (NVVS's JsonOutput): {"DCGM GPU Diagnostic": {"test_categories":
//     [{"category", "tests": [{"name", "results": [{"gpu_ids": "3", "status": "Fail",
//     "warnings": [{"warning", "error_id"}] or ["text"], "info": ["text"]}]}]}], "version"}};
//     a software test has one result whose gpu_ids lists every GPU ("0,1,2"), and arrays may
//     hold nulls (jsoncpp fills the gaps of results indexed by GPU).
//   - DCGM 4.x: the same tree under "DCGM Diagnostic", each result naming its entity
//     ("entity_group": "GPU", "entity_id": 3), a "test_summary" per test, the version under
//     "metadata", and a "runtime_error" when the run could not start.
type dcgmDiagJSON struct {
	V3       *dcgmDiagBody `json:"DCGM GPU Diagnostic"`
	V4       *dcgmDiagBody `json:"DCGM Diagnostic"`
	Version  string        `json:"version"`
	Metadata struct {
		Version string `json:"version"`
	} `json:"metadata"`
}

type dcgmDiagBody struct {
	Categories []*struct {
		Category string      `json:"category"`
		Tests    []*dcgmTest `json:"tests"`
	} `json:"test_categories"`
	Version      string `json:"version"`
	RuntimeError string `json:"runtime_error"`
}

type dcgmTest struct {
	Name    string        `json:"name"`
	Results []*dcgmResult `json:"results"`
	Summary *struct {
		Status string `json:"status"`
	} `json:"test_summary"`
}

type dcgmResult struct {
	GPUIDs      json.RawMessage   `json:"gpu_ids"`
	GPUID       json.RawMessage   `json:"gpu_id"`
	EntityGroup string            `json:"entity_group"`
	EntityID    json.RawMessage   `json:"entity_id"`
	Status      string            `json:"status"`
	Warnings    []json.RawMessage `json:"warnings"`
	Info        json.RawMessage   `json:"info"`
}

// ParseDcgmiDiag reads the output of dcgmi diag -j (either shape dcgmDiagJSON describes; text
// around the JSON object is ignored) into a DiagnoseResult without its level: one test per test
// name, its result the worst of its GPUs' (fail, warn, pass, skip), the GPUs it failed (or
// warned) on, and what DCGM said of it; the result is "fail" when any test failed.
func ParseDcgmiDiag(out []byte) (*daemonv1.DiagnoseResult, error) {
	start, end := bytes.IndexByte(out, '{'), bytes.LastIndexByte(out, '}')
	if start < 0 || end < start {
		return nil, errors.New("no JSON in dcgmi's output")
	}
	var doc dcgmDiagJSON
	if err := json.Unmarshal(out[start:end+1], &doc); err != nil {
		return nil, fmt.Errorf("read dcgmi's JSON: %w", err)
	}
	body := doc.V3
	if body == nil {
		body = doc.V4
	}
	if body == nil {
		return nil, errors.New(`dcgmi's JSON has neither "DCGM GPU Diagnostic" nor "DCGM Diagnostic"`)
	}
	if body.RuntimeError != "" {
		return nil, fmt.Errorf("dcgmi: %s", firstLine(body.RuntimeError))
	}
	res := &daemonv1.DiagnoseResult{Result: DiagnosePass, DcgmVersion: cmp.Or(body.Version, doc.Metadata.Version, doc.Version)}
	for _, cat := range body.Categories {
		if cat == nil {
			continue
		}
		for _, t := range cat.Tests {
			if t == nil || t.Name == "" {
				continue
			}
			dt := diagnoseTest(t)
			if dt.GetResult() == DiagnoseFail {
				res.Result = DiagnoseFail
			}
			res.Tests = append(res.Tests, dt)
		}
	}
	if len(res.Tests) == 0 {
		return nil, errors.New("dcgmi's JSON lists no tests")
	}
	if len(res.Tests) > MaxDiagnoseTests {
		// Failing tests first, each group in DCGM's order: what is cut is what passed.
		slices.SortStableFunc(res.Tests, func(a, b *daemonv1.DiagnoseTest) int {
			return statusRank(b.GetResult()) - statusRank(a.GetResult())
		})
		res.Tests = res.Tests[:MaxDiagnoseTests]
	}
	return res, nil
}

// diagnoseTest folds one test's per-GPU results into a DiagnoseTest.
func diagnoseTest(t *dcgmTest) *daemonv1.DiagnoseTest {
	dt := &daemonv1.DiagnoseTest{Name: t.Name, Result: "skip"}
	type seen struct {
		status string
		gpus   []int32
		msgs   []string
	}
	var results []seen
	for _, r := range t.Results {
		if r == nil {
			continue
		}
		s := seen{status: normalStatus(r.Status), gpus: r.gpus()}
		s.msgs = append(r.warnings(), stringsOf(r.Info)...)
		results = append(results, s)
		if statusRank(s.status) > statusRank(dt.Result) {
			dt.Result = s.status
		}
	}
	if len(results) == 0 && t.Summary != nil && t.Summary.Status != "" {
		dt.Result = normalStatus(t.Summary.Status)
	}
	var info []string
	for _, s := range results {
		if s.status == DiagnosePass {
			continue
		}
		if s.status == dt.Result && (s.status == DiagnoseFail || s.status == "warn") {
			for _, g := range s.gpus {
				if !slices.Contains(dt.GpuIndexes, g) {
					dt.GpuIndexes = append(dt.GpuIndexes, g)
				}
			}
		}
		prefix := ""
		if len(s.gpus) == 1 {
			prefix = fmt.Sprintf("GPU %d: ", s.gpus[0])
		}
		for _, m := range s.msgs {
			info = append(info, prefix+m)
		}
	}
	dt.Info = truncateUTF8(strings.Join(info, "\n"), MaxDiagnoseInfo)
	return dt
}

// gpus are the GPU indexes a result names: gpu_ids ("3", or "0,1,2" for a software test, as a
// string or a number), gpu_id, or a GPU entity's entity_id.
func (r *dcgmResult) gpus() []int32 {
	raw := r.GPUIDs
	if len(raw) == 0 {
		raw = r.GPUID
	}
	if len(raw) == 0 && (r.EntityGroup == "" || strings.EqualFold(r.EntityGroup, "GPU")) {
		raw = r.EntityID
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	var out []int32
	for f := range strings.SplitSeq(s, ",") {
		if n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32); err == nil && n >= 0 {
			out = append(out, int32(n))
		}
	}
	return out
}

// warnings are a result's warnings: strings (DCGM 2.x) or {"warning": text, ...} objects.
func (r *dcgmResult) warnings() []string {
	var out []string
	for _, w := range r.Warnings {
		var s string
		if json.Unmarshal(w, &s) == nil {
			out = append(out, s)
			continue
		}
		var o struct {
			Warning string `json:"warning"`
		}
		if json.Unmarshal(w, &o) == nil && o.Warning != "" {
			out = append(out, o.Warning)
		}
	}
	return out
}

// stringsOf reads a string or an array of strings; anything else is none.
func stringsOf(raw json.RawMessage) []string {
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return []string{s}
	}
	return nil
}

// normalStatus is DCGM's status ("Pass", "FAIL", "Skipped", "Warn") as a DiagnoseTest result;
// anything else (a test not run) is "skip".
func normalStatus(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "pass", "passed":
		return DiagnosePass
	case "fail", "failed", "error":
		return DiagnoseFail
	case "warn", "warning":
		return "warn"
	}
	return "skip"
}

// statusRank orders results by how bad they are.
func statusRank(s string) int {
	switch s {
	case DiagnoseFail:
		return 3
	case "warn":
		return 2
	case DiagnosePass:
		return 1
	}
	return 0
}

// truncateUTF8 cuts s to at most n bytes, on a rune boundary.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
