package daemon

import (
	"context"
	"slices"
	"testing"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
)

// draws is which of n commands of type typ fl fails.
func draws(fl *failer, typ string, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = fl.fails(typ)
	}
	return out
}

func TestFailerIsDeterministic(t *testing.T) {
	t.Parallel()
	opts := FakeOptions{FailRate: 0.3, Seed: 42}
	a := draws(newFailer(opts, "sim-0001"), command.Exec, 1000)
	if b := draws(newFailer(opts, "sim-0001"), command.Exec, 1000); !slices.Equal(a, b) {
		t.Error("the same seed and hostname fail different commands")
	}
	if b := draws(newFailer(opts, "sim-0002"), command.Exec, 1000); slices.Equal(a, b) {
		t.Error("two hostnames fail the same commands")
	}
	if b := draws(newFailer(FakeOptions{FailRate: 0.3, Seed: 43}, "sim-0001"), command.Exec, 1000); slices.Equal(a, b) {
		t.Error("two seeds fail the same commands")
	}
	if n := len(slices.DeleteFunc(a, func(b bool) bool { return !b })); n < 240 || n > 360 {
		t.Errorf("%d of 1000 failed at a rate of 0.3", n)
	}
}

func TestFailerScope(t *testing.T) {
	t.Parallel()
	all := FakeOptions{FailRate: 1}
	for _, typ := range []string{command.Upgrade, command.Reboot, command.Configure, command.Exec} {
		if !newFailer(all, "h").fails(typ) {
			t.Errorf("%s does not fail at rate 1", typ)
		}
	}
	for _, typ := range []string{command.Echo, command.Drain, command.Undrain, command.CollectInventory} {
		if newFailer(all, "h").fails(typ) {
			t.Errorf("%s fails", typ)
		}
	}
	if newFailer(FakeOptions{}, "h").fails(command.Exec) {
		t.Error("a failure at rate 0")
	}
	only := FakeOptions{FailRate: 1, FailTypes: []string{command.Reboot}}
	if newFailer(only, "h").fails(command.Exec) || !newFailer(only, "h").fails(command.Reboot) {
		t.Error("FailTypes is not obeyed")
	}
	one := FakeOptions{FailRate: 1, FailNodes: func(h string) bool { return h == "bad" }}
	if newFailer(one, "good").fails(command.Exec) || !newFailer(one, "bad").fails(command.Exec) {
		t.Error("FailNodes is not obeyed")
	}
}

func TestFakeOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, o := range []FakeOptions{
		{FailRate: -0.1}, {FailRate: 1.5}, {FailTypes: []string{command.Echo}}, {RebootDowntime: -time.Second},
		{TunnelPorts: []int{0}},
	} {
		if o.Validate() == nil {
			t.Errorf("%+v is accepted", o)
		}
	}
	if err := (FakeOptions{FailRate: 1, FailTypes: []string{command.Upgrade, command.Exec}}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestFailedRebootPlans: a failing reboot comes back ten times later, or never with
// StuckReboots.
func TestFailedRebootPlans(t *testing.T) {
	t.Parallel()
	for _, stuck := range []bool{false, true} {
		opts := FakeOptions{FailRate: 1, RebootDowntime: time.Second, StuckReboots: stuck}
		f := &Fake{opts: opts, failer: newFailer(opts, "h"), reboots: map[string]restartPlan{}}
		if _, err := f.reboot(context.Background(), &daemonv1.Command{Id: "c1"}); err != nil {
			t.Fatal(err)
		}
		if p := f.reboots["c1"]; p.downtime != 10*time.Second || p.never != stuck {
			t.Errorf("stuck %v: plan %+v", stuck, p)
		}
	}
}

// TestFakeRecord: a held command comes back running and only a later process finishes it; one
// that was running when its process stopped comes back interrupted, and that process's late
// result is ignored.
func TestFakeRecord(t *testing.T) {
	t.Parallel()
	r := newFakeRecord()
	first := r.view(1)
	_ = first.Started("upgrade", &daemonv1.Command{Id: "u"})
	_ = first.Started("slow", &daemonv1.Command{Id: "s"})
	_ = first.Started("quick", &daemonv1.Command{Id: "q"})
	_ = first.Finished("quick", &daemonv1.CommandResult{CommandId: "q", Success: true})
	r.hold("upgrade", 1)
	_ = first.Finished("upgrade", &daemonv1.CommandResult{CommandId: "u", Error: "handed over"})

	second := r.view(2)
	loaded, err := second.Load(time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Recorded{}
	for _, rec := range loaded {
		got[rec.Key] = rec
	}
	if u := got["upgrade"]; !u.Running || u.Result != nil {
		t.Errorf("held: %+v", u)
	}
	if s := got["slow"]; s.Result.GetError() != fakeInterrupted || s.Result.GetCommandId() != "s" {
		t.Errorf("interrupted: %+v", s)
	}
	if q := got["quick"]; !q.Result.GetSuccess() {
		t.Errorf("finished: %+v", q)
	}
	_ = first.Finished("slow", &daemonv1.CommandResult{CommandId: "s", Success: true})
	_ = second.Finished("upgrade", &daemonv1.CommandResult{CommandId: "u", Success: true})
	loaded, _ = r.view(3).Load(time.Now().Add(-time.Minute))
	for _, rec := range loaded {
		if ok := rec.Result.GetSuccess(); rec.Running || ok != (rec.Key != "slow") {
			t.Errorf("after the second process: %s %+v", rec.Key, rec)
		}
	}
}
