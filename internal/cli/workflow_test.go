package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/modules/standard"
)

// parseRun parses run's flags and arguments as cobra would and builds the request; stdin is
// what --configure - reads.
func parseRun(args []string, stdin string) (*workflowsv1.CreateRequest, error) {
	f := &runFlags{}
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(new(bytes.Buffer))
	f.add(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return f.createRequest(fs, fs.Args(), fs.ArgsLenAtDash(), strings.NewReader(stdin))
}

func TestWorkflowRunRequest(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(config, []byte(`{"gpu": {"persistence": true}, "tags": ["a"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	wantConfig, err := structpb.NewStruct(map[string]any{"gpu": map[string]any{"persistence": true}, "tags": []any{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want *workflowsv1.CreateRequest
	}{
		{
			name: "upgrade over a selector, with every policy flag",
			args: []string{"--upgrade", "1.4.0", "--selector", "role=gpu,zone=a", "--max-parallel", "2", "--max-failures", "1",
				"--min-healthy", "30s", "--drain-deadline", "0", "--step-timeout", "20m", "--name", "gpu upgrade", "--paused"},
			want: &workflowsv1.CreateRequest{
				Name:   "gpu upgrade",
				Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Upgrade{Upgrade: &workflowsv1.UpgradeAction{Version: "1.4.0"}}},
				Target: &workflowsv1.Target{LabelSelector: map[string]string{"role": "gpu", "zone": "a"}},
				Policy: &workflowsv1.Policy{MaxParallel: 2, MaxFailures: 1, MinHealthy: durationpb.New(30 * time.Second),
					DrainDeadline: durationpb.New(0), StepTimeout: durationpb.New(20 * time.Minute)},
				Paused: true,
			},
		},
		{
			name: "reboot a pool, durations left to the API",
			args: []string{"--reboot", "--pool", "pool-1"},
			want: &workflowsv1.CreateRequest{
				Name:   "reboot",
				Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Reboot{Reboot: &workflowsv1.RebootAction{}}},
				Target: &workflowsv1.Target{PoolId: "pool-1"},
				Policy: &workflowsv1.Policy{MaxParallel: 1},
			},
		},
		{
			name: "exec with arguments after --, nodes in order",
			args: []string{"--exec", "/usr/bin/nvidia-smi", "--nodes", "n2,n1", "--", "-r", "--id=0"},
			want: &workflowsv1.CreateRequest{
				Name:   "exec /usr/bin/nvidia-smi -r --id=0",
				Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Exec{Exec: &daemonv1.ExecPayload{Path: "/usr/bin/nvidia-smi", Args: []string{"-r", "--id=0"}}}},
				Target: &workflowsv1.Target{NodeIds: []string{"n2", "n1"}},
				Policy: &workflowsv1.Policy{MaxParallel: 1},
			},
		},
		{
			name: "drain",
			args: []string{"--drain", "--nodes", "n1"},
			want: &workflowsv1.CreateRequest{
				Name:   "drain",
				Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Drain{Drain: &workflowsv1.DrainAction{}}},
				Target: &workflowsv1.Target{NodeIds: []string{"n1"}},
				Policy: &workflowsv1.Policy{MaxParallel: 1},
			},
		},
		{
			name: "configure from a file",
			args: []string{"--configure", config, "--nodes", "n1"},
			want: &workflowsv1.CreateRequest{
				Name:   "configure (2 keys)",
				Action: &workflowsv1.Action{Kind: &workflowsv1.Action_Configure{Configure: &daemonv1.ConfigurePayload{Config: wantConfig}}},
				Target: &workflowsv1.Target{NodeIds: []string{"n1"}},
				Policy: &workflowsv1.Policy{MaxParallel: 1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseRun(tc.args, "")
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(got, tc.want) {
				t.Errorf("request\n%v\nwant\n%v", got, tc.want)
			}
		})
	}

	t.Run("configure from standard input", func(t *testing.T) {
		t.Parallel()
		got, err := parseRun([]string{"--configure", "-", "--pool", "p"}, `{"a": 1}`)
		if err != nil {
			t.Fatal(err)
		}
		if v := got.GetAction().GetConfigure().GetConfig().GetFields()["a"].GetNumberValue(); v != 1 {
			t.Errorf("config %v", got.GetAction().GetConfigure())
		}
	})
}

func TestWorkflowRunRefusesBadFlags(t *testing.T) {
	t.Parallel()
	notJSON := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(notJSON, []byte(`[1, 2]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"no action", []string{"--pool", "p"}, "give one action: --upgrade VERSION"},
		{"two actions", []string{"--reboot", "--drain", "--pool", "p"}, "give only one action, not --reboot and --drain"},
		{"three actions", []string{"--upgrade", "1.0", "--reboot", "--exec", "/bin/x", "--pool", "p"}, "not --upgrade and --reboot and --exec"},
		{"a false bool is no action", []string{"--reboot=false", "--pool", "p"}, "give one action"},
		{"no target", []string{"--reboot"}, "give one target: --pool ID, --selector k=v,... or --nodes ID,ID,..."},
		{"two targets", []string{"--reboot", "--pool", "p", "--nodes", "n1"}, "give only one target, not --pool and --nodes"},
		{"empty pool", []string{"--reboot", "--pool", ""}, "--pool needs a pool id"},
		{"empty selector", []string{"--reboot", "--selector", ""}, `"--selector" flag`},
		{"malformed selector", []string{"--reboot", "--selector", "role"}, `"--selector" flag`},
		{"empty node id", []string{"--reboot", "--nodes", "n1,,n2"}, "--nodes: a node id is empty"},
		{"duplicate node", []string{"--reboot", "--nodes", "n1,n2,n1"}, "--nodes: n1 is given twice"},
		{"bad version", []string{"--upgrade", "1.0 beta", "--pool", "p"}, "--upgrade: upgrade.version"},
		{"empty version", []string{"--upgrade", "", "--pool", "p"}, "--upgrade: upgrade.version"},
		{"relative exec path", []string{"--exec", "bin/x", "--pool", "p"}, "--exec: exec.path"},
		{"arguments without --exec", []string{"--reboot", "--pool", "p", "--", "-x"}, "the arguments after -- are for --exec, not --reboot"},
		{"stray argument", []string{"--reboot", "--pool", "p", "extra"}, `unexpected argument "extra"`},
		{"configure file missing", []string{"--configure", "/nonexistent/c.json", "--pool", "p"}, "--configure: open /nonexistent/c.json"},
		{"configure not an object", []string{"--configure", notJSON, "--pool", "p"}, "is not a JSON object"},
		{"max parallel 0", []string{"--reboot", "--pool", "p", "--max-parallel", "0"}, "--max-parallel must be 1 to 1000, got 0"},
		{"max parallel too many", []string{"--reboot", "--pool", "p", "--max-parallel", "1001"}, "--max-parallel must be 1 to 1000"},
		{"negative max failures", []string{"--reboot", "--pool", "p", "--max-failures", "-1"}, "--max-failures must be 0 or more"},
		{"unparsable duration", []string{"--reboot", "--pool", "p", "--min-healthy", "soon"}, `"--min-healthy" flag`},
		{"unit-less duration", []string{"--reboot", "--pool", "p", "--drain-deadline", "5"}, `"--drain-deadline" flag`},
		{"min healthy too long", []string{"--reboot", "--pool", "p", "--min-healthy", "2h"}, "--min-healthy must be 0s to 1h0m0s, got 2h0m0s"},
		{"negative drain deadline", []string{"--reboot", "--pool", "p", "--drain-deadline", "-1s"}, "--drain-deadline must be 0s to 168h0m0s"},
		{"step timeout too short", []string{"--reboot", "--pool", "p", "--step-timeout", "30s"}, "--step-timeout must be 1m0s to 24h0m0s, got 30s"},
		{"name too long", []string{"--reboot", "--pool", "p", "--name", strings.Repeat("n", 129)}, "--name must be at most 128 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseRun(tc.args, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// runWorkflowCommand runs `better-compute workflow args...` in this process.
func runWorkflowCommand(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	root := newRootCommand(standard.Modules())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"workflow"}, args...))
	err = root.ExecuteContext(t.Context())
	return out.String(), err
}

func TestWorkflowCommandsCheckBeforeCalling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"run without an API", []string{"run", "--reboot", "--pool", "p", "--api", "", "--api-key", ""}, "the API is needed"},
		{"run checks its flags first", []string{"run", "--reboot", "--api", ""}, "give one target"},
		{"unknown output", []string{"list", "-o", "yaml", "--api", "http://127.0.0.1:1", "--api-key", "k"}, "--output must be table or json"},
		{"status needs an id", []string{"status"}, "accepts 1 arg(s), received 0"},
		{"resume with negative max failures", []string{"resume", "w1", "--max-failures", "-2", "--api", "http://127.0.0.1:1", "--api-key", "k"}, "--max-failures must be 0 or more"},
		{"list limit", []string{"list", "--limit", "0", "--api", "http://127.0.0.1:1", "--api-key", "k"}, "--limit must be 1 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := runWorkflowCommand(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
