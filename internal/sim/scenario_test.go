package sim

import (
	"strings"
	"testing"
	"time"
)

func TestParseScenario(t *testing.T) {
	t.Parallel()
	s, err := ParseScenario([]byte(`{"faults":[
		{"kind":"disconnect","fraction":0.1,"every":"30s"},
		{"kind":"latency","count":5,"delay":"200ms","for":"1m"},
		{"kind":"skew","fraction":0.05,"skew":"-90s"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Fault{
		{Kind: FaultDisconnect, Fraction: 0.1, Every: 30 * time.Second},
		{Kind: FaultLatency, Count: 5, Delay: 200 * time.Millisecond, For: time.Minute},
		{Kind: FaultSkew, Fraction: 0.05, Skew: -90 * time.Second},
	}
	if len(s.Faults) != len(want) {
		t.Fatalf("faults %+v", s.Faults)
	}
	for i := range want {
		if s.Faults[i] != want[i] {
			t.Errorf("fault %d: %+v, want %+v", i, s.Faults[i], want[i])
		}
	}
	if s, err := ParseScenario(nil); err != nil || len(s.Faults) != 0 {
		t.Errorf("empty scenario: %+v, %v", s, err)
	}
	for doc, wantErr := range map[string]string{
		`{"faults":[{"kind":"melt","count":1}]}`:                          "kind",
		`{"faults":[{"kind":"disconnect"}]}`:                              "fraction or count",
		`{"faults":[{"kind":"disconnect","fraction":2}]}`:                 "fraction",
		`{"faults":[{"kind":"latency","count":1}]}`:                       "delay",
		`{"faults":[{"kind":"skew","count":1}]}`:                          "skew",
		`{"faults":[{"kind":"skew","count":1,"skew":"1m","every":"1s"}]}`: "from the start",
		`{"faults":[{"kind":"crash","count":1,"every":"soon"}]}`:          "soon",
		`{"faults":[{"kind":"crash","count":1,"evry":"1s"}]}`:             "evry",
	} {
		if _, err := ParseScenario([]byte(doc)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: %v, want an error about %q", doc, err, wantErr)
		}
	}
}

func TestParseFault(t *testing.T) {
	t.Parallel()
	f, err := ParseFault("crash,fraction=0.01,after=1m,every=2m,for=10s")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Fault{Kind: FaultCrash, Fraction: 0.01, After: time.Minute, Every: 2 * time.Minute, For: 10 * time.Second}); f != want {
		t.Errorf("%+v, want %+v", f, want)
	}
	for _, bad := range []string{"crash", "crash,count", "crash,count=x", "crash,colour=red", "latency,count=1"} {
		if _, err := ParseFault(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if n := (Fault{Fraction: 0.001}).machines(100); n != 1 {
		t.Errorf("a small fraction hits %d machines, want 1", n)
	}
	if n := (Fault{Count: 50}).machines(10); n != 10 {
		t.Errorf("count past the fleet hits %d machines, want 10", n)
	}
}

func TestInventoryIsDeterministicAndVaried(t *testing.T) {
	t.Parallel()
	const n = 2000
	uuids := map[string]bool{}
	models := map[string]int{}
	counts := map[int]int{}
	serials := map[string]bool{}
	dgx := 0
	for i := range n {
		a, b := Inventory(42, i, "sim"), Inventory(42, i, "sim")
		if a.String() != b.String() {
			t.Fatalf("machine %d differs between two draws", i)
		}
		if a.GetCpus() < 8 || a.GetCpus() > 192 || a.GetMemoryBytes() < 32<<30 || len(a.GetDisks()) == 0 || len(a.GetNics()) == 0 {
			t.Errorf("machine %d: %v", i, a)
		}
		counts[len(a.GetGpus())]++
		for _, g := range a.GetGpus() {
			models[g.GetModel()]++
			if !strings.HasPrefix(g.GetUuid(), "GPU-") || len(g.GetUuid()) != 40 || uuids[g.GetUuid()] {
				t.Errorf("GPU UUID %q bad or repeated", g.GetUuid())
			}
			uuids[g.GetUuid()] = true
			if g.GetMemoryBytes() < 20<<30 {
				t.Errorf("GPU %s with %d bytes", g.GetModel(), g.GetMemoryBytes())
			}
			// Identity: a serial (GeForce boards have none), a PCI bus id and NUMA node, VBIOS
			// and power limit.
			if g.GetModel() != "NVIDIA RTX 4090" && (len(g.GetSerial()) != 13 || serials[g.GetSerial()]) {
				t.Errorf("GPU serial %q bad or repeated", g.GetSerial())
			}
			serials[g.GetSerial()] = true
			if !strings.HasPrefix(g.GetPciBusId(), "00000000:") || g.NumaNode == nil || g.GetNumaNode() > 1 ||
				g.GetVbiosVersion() == "" || g.GetPowerLimitWatts() < 300 || g.GetMinorNumber() != g.GetIndex() {
				t.Errorf("GPU identity %v", g)
			}
		}
		if len(a.GetGpus()) == 0 != (a.GetGpuDriver() == nil) {
			t.Errorf("machine %d: %d GPUs, driver %v", i, len(a.GetGpus()), a.GetGpuDriver())
		}
		// A DGX-like 8-GPU Hopper machine: NVSwitches set up by the fabric manager, DGX buses,
		// four GPUs on each NUMA node.
		if gpus := a.GetGpus(); len(gpus) == 8 && (gpus[0].GetModel() == "NVIDIA H100 80GB HBM3" || gpus[0].GetModel() == "NVIDIA H200") {
			dgx++
			if d := a.GetGpuDriver(); d.GetFabricManagerState() != "Completed" || d.GetFabricManagerStatus() != "Success" ||
				gpus[1].GetPciBusId() != "00000000:2A:00.0" || gpus[3].GetNumaNode() != 0 || gpus[4].GetNumaNode() != 1 {
				t.Errorf("machine %d: DGX-like %v %v", i, gpus, d)
			}
		}
	}
	if Inventory(43, 0, "sim").String() == Inventory(42, 0, "sim").String() && Inventory(43, 1, "sim").String() == Inventory(42, 1, "sim").String() {
		t.Error("the seed changes nothing")
	}
	if dgx == 0 {
		t.Errorf("no 8-GPU H100 or H200 machine in %d", n)
	}
	for _, m := range []string{"NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA RTX 4090"} {
		if models[m] == 0 {
			t.Errorf("no %s in %d machines", m, n)
		}
	}
	for _, c := range []int{0, 1, 2, 4, 8} {
		if counts[c] == 0 {
			t.Errorf("no machine with %d GPUs", c)
		}
	}
	if cpuOnly := float64(counts[0]) / n; cpuOnly < 0.35 || cpuOnly > 0.55 {
		t.Errorf("%.0f%% CPU-only machines, want about 45%%", cpuOnly*100)
	}
	if Hostname("sim", 0) != "sim-0001" || Hostname("sim", 9999) != "sim-10000" {
		t.Error("hostnames")
	}
}
