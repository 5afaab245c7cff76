package provision

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// The kill test runs the controller in a child process (this test binary again) that it kills
// with SIGKILL; these say where the child finds the database, the gateway and the provider.
const (
	killChildEnv    = "BC_PROVISION_KILL_CHILD"
	killDatabaseEnv = "BC_PROVISION_KILL_DATABASE"
	killGatewayEnv  = "BC_PROVISION_KILL_GATEWAY"
	killCloudEnv    = "BC_PROVISION_KILL_CLOUD"
	remoteKind      = "remote"
)

// remoteProvider is a provider whose machines live in another process: the test's sim Cloud,
// served over HTTP, so that killing the controller's process kills neither the provider's state
// nor the machines' daemons, as with a real cloud.
type remoteProvider struct{ url string }

func remoteFactory(url string) Providers {
	return Providers{remoteKind: func(json.RawMessage, []byte, provision.Egress) (provision.Provider, error) {
		return remoteProvider{url: url}, nil
	}}
}

// cloudCall is one call to the served Cloud.
type cloudCall struct {
	Op         string                  `json:"op"`
	Create     provision.CreateRequest `json:"create"`
	ProviderID string                  `json:"providerId"`
	Action     provision.PowerAction   `json:"action"`
}

// cloudReply is its answer; NotFound carries provision.ErrNotFound across.
type cloudReply struct {
	Machine  provision.Machine   `json:"machine"`
	Machines []provision.Machine `json:"machines"`
	Error    string              `json:"error"`
	NotFound bool                `json:"notFound"`
}

func (p remoteProvider) call(ctx context.Context, c cloudCall) (cloudReply, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return cloudReply{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return cloudReply{}, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return cloudReply{}, err
	}
	defer res.Body.Close()
	var r cloudReply
	if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
		return cloudReply{}, err
	}
	switch {
	case r.NotFound:
		return r, fmt.Errorf("%s: %w", r.Error, provision.ErrNotFound)
	case r.Error != "":
		return r, errors.New(r.Error)
	}
	return r, nil
}

func (p remoteProvider) Create(ctx context.Context, req provision.CreateRequest) (provision.Machine, error) {
	r, err := p.call(ctx, cloudCall{Op: "create", Create: req})
	return r.Machine, err
}

func (p remoteProvider) Get(ctx context.Context, id string) (provision.Machine, error) {
	r, err := p.call(ctx, cloudCall{Op: "get", ProviderID: id})
	return r.Machine, err
}

func (p remoteProvider) Power(ctx context.Context, id string, action provision.PowerAction) error {
	_, err := p.call(ctx, cloudCall{Op: "power", ProviderID: id, Action: action})
	return err
}

func (p remoteProvider) Delete(ctx context.Context, id string) error {
	_, err := p.call(ctx, cloudCall{Op: "delete", ProviderID: id})
	return err
}

func (p remoteProvider) List(ctx context.Context) ([]provision.Machine, error) {
	r, err := p.call(ctx, cloudCall{Op: "list"})
	return r.Machines, err
}

// serveCloud serves p, a sim class's provider, to remoteProviders.
func serveCloud(t *testing.T, p provision.Provider) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c cloudCall
		var reply cloudReply
		err := json.NewDecoder(r.Body).Decode(&c)
		if err == nil {
			switch c.Op {
			case "create":
				reply.Machine, err = p.Create(r.Context(), c.Create)
			case "get":
				reply.Machine, err = p.Get(r.Context(), c.ProviderID)
			case "power":
				err = p.Power(r.Context(), c.ProviderID, c.Action)
			case "delete":
				err = p.Delete(r.Context(), c.ProviderID)
			case "list":
				reply.Machines, err = p.List(r.Context())
			default:
				err = fmt.Errorf("unknown op %q", c.Op)
			}
		}
		if err != nil {
			reply.Error, reply.NotFound = err.Error(), errors.Is(err, provision.ErrNotFound)
		}
		_ = json.NewEncoder(w).Encode(reply)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// runKillChild is the child process: the lifecycle controller and the node controllers over the
// parent's database, until it is killed.
func runKillChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := database.Open(ctx, os.Getenv(killDatabaseEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	cfg := DefaultConfig()
	cfg.Providers, cfg.PollInterval = []string{remoteKind}, 100*time.Millisecond
	c, err := NewController(ControllerOptions{
		Pool: pool, Secret: servertest.Secret, Config: cfg,
		Providers: remoteFactory(os.Getenv(killCloudEnv)), GatewayEndpoint: os.Getenv(killGatewayEnv),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	// A machine claimed by a process that dies stays hidden for twice the timeout: a short one
	// keeps the test to seconds a kill (the module's is a minute).
	reg := c.Registration()
	reg.Timeout = 2 * time.Second
	rt := workerstest.New(workerstest.Options{
		Pool: pool, Roles: []string{workers.RoleControllers},
		Reconcilers: append(workerstest.NodeControl(pool, workerstest.NodeControlOptions{CommandPoll: 100 * time.Millisecond}), reg),
		// A killed process's shards free within a second, not shard.DefaultTTL.
		ShardTTL: time.Second,
	})
	rt.Run(ctx)
	return 0
}

// TestKilledControllerAtEveryStep kills the process running the lifecycle controller with
// SIGKILL as soon as a machine reaches each step of its lifecycle, then starts a new process:
// every machine ends ready, then gone, exactly once, and the provider made one machine for each
// and holds none of them at the end.
func TestKilledControllerAtEveryStep(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cloudURL := ""
	e := newEnv(t, remoteFactory("unused: the API does not call providers"))
	e.startGateway(t)
	sim, err := e.cloud.Factory([]byte(`{"bootDelay": "200ms"}`), nil, provision.Egress{})
	if err != nil {
		t.Fatal(err)
	}
	cloudURL = serveCloud(t, sim)
	if _, err := e.client.CreateClass(ctx, &provisionmodulev1.CreateClassRequest{Name: "remote", Provider: remoteKind}); err != nil {
		t.Fatal(err)
	}

	var child *exec.Cmd
	start := func() {
		child = exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), killChildEnv+"=1", killDatabaseEnv+"="+e.Pool.Config().ConnString(),
			killGatewayEnv+"="+e.gateway, killCloudEnv+"="+cloudURL)
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
	}
	kill := func() {
		_ = child.Process.Signal(syscall.SIGKILL)
		_ = child.Wait()
	}
	t.Cleanup(func() {
		if child != nil && child.ProcessState == nil {
			kill()
		}
	})
	// killAt kills the controller's process once the machine is in state (or past it: the
	// process acts between our looks), then starts another.
	began := time.Now()
	killAt := func(id uuid.UUID, state string, order []string) {
		t.Helper()
		at := slices.Index(order, state)
		poll.Until(t, time.Minute, "machine "+id.String()+" at "+state, func() bool {
			i := slices.Index(order, e.machine(t, id).State)
			return i >= at
		}, poll.Every(2*time.Millisecond))
		kill()
		start()
		t.Logf("%s killed at %s after %v", id, state, time.Since(began))
	}

	up := []string{"requested", "provisioning", "booting", "joined", "ready"}
	down := []string{"ready", "deleting", "draining", "destroying", "gone"}
	remove := func(id uuid.UUID) {
		t.Helper()
		if _, err := e.client.DeleteMachine(ctx, &provisionmodulev1.DeleteMachineRequest{Id: id.String()}); err != nil {
			t.Fatal(err)
		}
	}
	start()
	var ids []uuid.UUID
	for i, state := range up {
		id := e.createMachine(t, "remote", fmt.Sprintf("up-%d", i))
		ids = append(ids, id)
		killAt(id, state, up)
		e.awaitState(t, id, "ready", time.Minute)
		remove(id)
		e.awaitState(t, id, "gone", time.Minute)
	}
	for i, state := range down[1:] {
		id := e.createMachine(t, "remote", fmt.Sprintf("down-%d", i))
		ids = append(ids, id)
		e.awaitState(t, id, "ready", time.Minute)
		remove(id)
		killAt(id, state, down)
		e.awaitState(t, id, "gone", time.Minute)
	}
	kill()

	for _, id := range ids {
		steps := e.steps(t, id)
		if count(steps, "ready") != 1 || count(steps, "gone") != 1 {
			t.Errorf("machine %s went through %v: want ready and gone once each", id, steps)
		}
	}
	if got := e.cloud.Creates(); got != len(ids) {
		t.Errorf("the provider made %d machines for %d machines", got, len(ids))
	}
	for _, m := range e.cloud.All() {
		if m.State != provision.ProviderGone {
			t.Errorf("the provider still holds %s (%s), tagged %v", m.ProviderID, m.State, m.Tags)
		}
	}
}
