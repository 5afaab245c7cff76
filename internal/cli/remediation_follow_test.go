package cli

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	remediationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1/remediationsv1connect"
	"github.com/better-compute/better-compute/internal/modules/standard"
)

// fakeRemediations answers remediations/get with its answers in turn, repeating the last.
type fakeRemediations struct {
	remediationsv1connect.UnimplementedRemediationsServiceHandler
	mu      sync.Mutex
	answers []*remediationsv1.Remediation
	gets    int
}

func (f *fakeRemediations) Get(_ context.Context, req *remediationsv1.GetRequest) (*remediationsv1.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.answers[min(f.gets, len(f.answers)-1)]
	f.gets++
	if req.GetId() != r.GetId() {
		return nil, errors.New("unknown id")
	}
	return &remediationsv1.GetResponse{Remediation: r}, nil
}

func serveRemediations(t *testing.T, f *fakeRemediations) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(remediationsv1connect.NewRemediationsServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

var remT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) *timestamppb.Timestamp {
	return timestamppb.New(remT0.Add(time.Duration(s) * time.Second))
}

// remediationAt is remediation r1 of gpu-1's GPU on the reset ladder (drain, gpuReset,
// diagnose, verify, reboot, service) after the history entries done have ended; with running,
// the next step is running.
func remediationAt(state remediationsv1.State, done int, running bool) *remediationsv1.Remediation {
	r := &remediationsv1.Remediation{
		Id: "r1", NodeId: "n1", Hostname: "gpu-1", GpuUuid: "GPU-1a2b", Reason: "xid 79", Ladder: "reset", State: state,
		Steps: []*remediationsv1.Step{
			{Action: "drain"}, {Action: "gpuReset"}, {Action: "diagnose", Level: 3},
			{Action: "verify", Window: durationpb.New(10 * time.Minute)}, {Action: "reboot"}, {Action: "service"},
		},
		CreateTime: at(0),
	}
	all := []*remediationsv1.HistoryEntry{
		{Step: 0, Action: "drain", Outcome: "passed", StartTime: at(0), EndTime: at(12)},
		{Step: 1, Action: "gpuReset", Outcome: "passed", StartTime: at(12), EndTime: at(15)},
		{Step: 2, Action: "diagnose", Outcome: "failed", Detail: "memory test\nfailed on GPU 0", StartTime: at(15), EndTime: at(75)},
		{Step: 4, Action: "reboot", Outcome: "passed", StartTime: at(75), EndTime: at(135)},
		{Step: 5, Action: "service", Outcome: "passed", Detail: "ticket opened", StartTime: at(135), EndTime: at(136)},
	}
	r.History = all[:done]
	if done > 0 {
		r.Step = all[done-1].GetStep()
	}
	if running && done < len(all) {
		e := proto.CloneOf(all[done])
		e.Outcome, e.EndTime, e.Detail = "", nil, ""
		r.History = append(r.History, e)
		r.Step = e.GetStep()
	}
	if state != remediationsv1.State_STATE_WAITING && state != remediationsv1.State_STATE_RUNNING {
		r.EndTime = r.GetHistory()[len(r.GetHistory())-1].GetEndTime()
	}
	return r
}

func runRemediationsAgainst(t *testing.T, url string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCommand(standard.Modules())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(append([]string{"remediations"}, args...), "--api", url, "--api-key", "bck_test"))
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func TestRemediationsFollowPrintsEachStepAsItEnds(t *testing.T) {
	t.Parallel()
	S := remediationsv1.State_STATE_RUNNING
	f := &fakeRemediations{answers: []*remediationsv1.Remediation{
		remediationAt(remediationsv1.State_STATE_WAITING, 0, false),
		remediationAt(S, 0, true),
		remediationAt(S, 2, true),
		remediationAt(S, 2, true),
		remediationAt(S, 3, true),
		remediationAt(remediationsv1.State_STATE_SUCCEEDED, 4, false),
	}}
	stdout, _, err := runRemediationsAgainst(t, serveRemediations(t, f), "follow", "--id", "r1")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	want := []string{
		"Remediation r1: gpu-1 GPU GPU-1a2b, xid 79, ladder reset of 6 steps (Ctrl-C stops following, not the remediation)",
		"[------] 0/6 waiting · waiting",
		"[>-----] 1/6 drain · running",
		"1/6 drain       passed         12s",
		"2/6 gpuReset    passed          3s",
		"[##>---] 3/6 diagnose · running", // once: the next answer is the same
		"3/6 diagnose    failed        1m0s  memory test failed on GPU 0",
		"[##!->-] 5/6 reboot · running",
		"5/6 reboot      passed        1m0s",
		"[##!-#-] 5/6 reboot · succeeded · 2m15s",
		"Remediation r1 succeeded after 2m15s",
	}
	if len(lines) != len(want) {
		t.Fatalf("printed\n%s\nwant\n%s", stdout, strings.Join(want, "\n"))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d is %q, want %q", i+1, lines[i], want[i])
		}
	}
}

func TestRemediationsFollowJSONAndExitCodes(t *testing.T) {
	t.Parallel()
	t.Run("json: progress on stderr, the last answer on stdout", func(t *testing.T) {
		t.Parallel()
		last := remediationAt(remediationsv1.State_STATE_RETURNED, 5, false)
		f := &fakeRemediations{answers: []*remediationsv1.Remediation{last}}
		stdout, stderr, err := runRemediationsAgainst(t, serveRemediations(t, f), "follow", "--id", "r1", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		got := &remediationsv1.GetResponse{}
		if err := protojson.Unmarshal([]byte(stdout), got); err != nil || !proto.Equal(got.GetRemediation(), last) {
			t.Errorf("stdout %s (%v), want the last answer", stdout, err)
		}
		if !strings.Contains(stderr, "6/6 service") || !strings.Contains(stderr, "Remediation r1 returned after") {
			t.Errorf("progress on standard error:\n%s", stderr)
		}
	})
	t.Run("no id is a usage error", func(t *testing.T) {
		t.Parallel()
		_, _, err := runRemediationsAgainst(t, "http://127.0.0.1:1", "follow")
		if ExitCode(err) != ExitUsage {
			t.Errorf("error %v, exit code %d, want %d", err, ExitCode(err), ExitUsage)
		}
	})
	// main's exit codes, in a process of its own.
	for state, code := range map[remediationsv1.State]int{
		remediationsv1.State_STATE_SUCCEEDED: 0,
		remediationsv1.State_STATE_SERVICE:   1,
		remediationsv1.State_STATE_CANCELLED: 1,
		remediationsv1.State_STATE_FAILED:    1,
	} {
		t.Run(state.String(), func(t *testing.T) {
			t.Parallel()
			f := &fakeRemediations{answers: []*remediationsv1.Remediation{remediationAt(state, 5, false)}}
			stdout, stderr, got := runMain(t, "remediations", "follow", "--id", "r1", "--api", serveRemediations(t, f), "--api-key", "bck_test")
			if got != code {
				t.Errorf("exit code %d, want %d; stderr %s", got, code, stderr)
			}
			if state == remediationsv1.State_STATE_SERVICE &&
				(!strings.Contains(stderr, "remediations return-from-service --id r1") || !strings.Contains(stdout, "the hardware needs people")) {
				t.Errorf("service does not say how to return it:\nstdout %s\nstderr %s", stdout, stderr)
			}
		})
	}
}
