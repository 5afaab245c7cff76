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

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1/workflowsv1connect"
	"github.com/better-compute/better-compute/internal/modules/standard"
)

// fakeWorkflows answers workflows/create with a workflow of its first Get answer, and
// workflows/get with its answers in turn, repeating the last: how following is tested without
// the real API (end-to-end tests of the CLI against it come with the server).
type fakeWorkflows struct {
	workflowsv1connect.UnimplementedWorkflowsServiceHandler
	mu      sync.Mutex
	answers []*workflowsv1.GetResponse
	gets    int
	created *workflowsv1.CreateRequest
}

func (f *fakeWorkflows) Create(_ context.Context, req *workflowsv1.CreateRequest) (*workflowsv1.CreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = req
	return &workflowsv1.CreateResponse{Workflow: f.answers[0].GetWorkflow()}, nil
}

func (f *fakeWorkflows) Get(_ context.Context, req *workflowsv1.GetRequest) (*workflowsv1.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	res := f.answers[min(f.gets, len(f.answers)-1)]
	f.gets++
	if req.GetId() != res.GetWorkflow().GetId() {
		return nil, errors.New("unknown id")
	}
	return res, nil
}

// serveFake serves f and returns the API URL.
func serveFake(t *testing.T, f *fakeWorkflows) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(workflowsv1connect.NewWorkflowsServiceHandler(f))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// answer is a workflows/get answer for workflow w1 of two nodes, the first failed when failed.
func answer(state string, succeeded, inProgress, failed int32) *workflowsv1.GetResponse {
	pending := 2 - succeeded - inProgress - failed
	wf := &workflowsv1.Workflow{
		Id: "w1", Name: "reboot", State: state,
		Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Reboot{Reboot: &workflowsv1.RebootAction{}}},
		Target: &workflowsv1.Target{PoolId: "p"},
		Policy: &workflowsv1.Policy{MaxParallel: 1},
		Counts: &workflowsv1.Counts{Total: 2, Pending: pending, InProgress: inProgress, Succeeded: succeeded, Failed: failed},
	}
	nodes := []*workflowsv1.NodeProgress{
		{NodeId: "n1", Hostname: "gpu-1", Step: "pending"},
		{NodeId: "n2", Hostname: "gpu-2", Step: "pending"},
	}
	if failed > 0 {
		wf.Reason = "1 node failed, more than max failures 0"
		nodes[0].Step, nodes[0].Attempt, nodes[0].Message = "failed", 1, "reboot: the node did not come back"
	}
	return &workflowsv1.GetResponse{Workflow: wf, Nodes: nodes}
}

// runWorkflowAgainst runs `better-compute workflow args... --api URL` in this process.
func runWorkflowAgainst(t *testing.T, url string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCommand(standard.Modules())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append(append([]string{"workflow"}, args...), "--api", url, "--api-key", "bck_test"))
	err = root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func TestWorkflowRunFollowsUntilPausedForFailures(t *testing.T) {
	t.Parallel()
	f := &fakeWorkflows{answers: []*workflowsv1.GetResponse{answer("running", 0, 1, 0), answer("running", 0, 1, 0), answer("paused", 0, 0, 1)}}
	stdout, _, err := runWorkflowAgainst(t, serveFake(t, f), "run", "--reboot", "--pool", "p")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitPaused || !strings.Contains(err.Error(), "workflow resume w1 --retry-failed") {
		t.Fatalf("error %v, want exit code 3 saying how to resume", err)
	}
	if !proto.Equal(f.created.GetTarget(), &workflowsv1.Target{PoolId: "p"}) {
		t.Errorf("created %v", f.created)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	want := []string{
		"Workflow w1: reboot, 2 nodes (Ctrl-C stops following, not the workflow)",
		progressLine(answer("running", 0, 1, 0).GetWorkflow()), // once: the second answer is the same
		progressLine(answer("paused", 0, 0, 1).GetWorkflow()),
		"Failed nodes:",
	}
	if len(lines) != len(want)+2 || strings.Join(lines[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("printed\n%s\nwant it to start with\n%s\nand the failed node", stdout, strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(lines[len(want)], "NODE") || !strings.Contains(lines[len(want)+1], "gpu-1  failed  1") ||
		!strings.Contains(lines[len(want)+1], "the node did not come back") {
		t.Errorf("failed nodes table:\n%s", strings.Join(lines[len(want):], "\n"))
	}
}

func TestWorkflowStatusWatchFollowsAManualPause(t *testing.T) {
	t.Parallel()
	paused := answer("paused", 1, 0, 0)
	paused.Workflow.Reason = "looking at the first node"
	f := &fakeWorkflows{answers: []*workflowsv1.GetResponse{paused, answer("succeeded", 2, 0, 0)}}
	stdout, stderr, err := runWorkflowAgainst(t, serveFake(t, f), "status", "w1", "--watch", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	got := &workflowsv1.GetResponse{}
	if err := protojson.Unmarshal([]byte(stdout), got); err != nil {
		t.Fatalf("stdout is not a GetResponse: %v\n%s", err, stdout)
	}
	if !proto.Equal(got, answer("succeeded", 2, 0, 0)) {
		t.Errorf("printed %v, want the last answer", got)
	}
	if !strings.Contains(stderr, "paused: looking at the first node") || !strings.Contains(stderr, "succeeded") {
		t.Errorf("progress on standard error:\n%s", stderr)
	}
}

func TestWorkflowStatusAndExitCodes(t *testing.T) {
	t.Parallel()
	t.Run("status prints the workflow and its nodes", func(t *testing.T) {
		t.Parallel()
		f := &fakeWorkflows{answers: []*workflowsv1.GetResponse{answer("paused", 0, 0, 1)}}
		stdout, _, err := runWorkflowAgainst(t, serveFake(t, f), "status", "w1")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"ID:", "w1", "Action:", "reboot", "Target:", "pool p", "State:", "paused: 1 node failed", "gpu-2  pending", "gpu-1  failed   1"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("status does not show %q:\n%s", want, stdout)
			}
		}
	})
	// main's exit codes, in a process of its own: 3 paused for failures, 1 cancelled.
	for state, code := range map[string]int{"paused": 3, "cancelled": 1} {
		t.Run(state, func(t *testing.T) {
			t.Parallel()
			f := &fakeWorkflows{answers: []*workflowsv1.GetResponse{answer(state, 0, 0, 1)}}
			_, stderr, got := runMain(t, "workflow", "status", "w1", "--watch", "--api", serveFake(t, f), "--api-key", "bck_test")
			if got != code || !strings.Contains(stderr, "workflow w1 "+state) {
				t.Errorf("exit code %d, want %d; stderr %s", got, code, stderr)
			}
		})
	}
}
