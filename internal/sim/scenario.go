package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Kinds of fault.
const (
	FaultDisconnect = "disconnect"
	FaultLatency    = "latency"
	FaultCrash      = "crash"
	FaultSkew       = "skew"
	FaultFlap       = "flap"
)

// Scenario is the faults a fleet suffers. See the package documentation for the format.
type Scenario struct {
	Faults []Fault `yaml:"faults"`
}

// Fault is one kind of trouble for a share of the machines.
type Fault struct {
	Kind string `yaml:"kind"`
	// Fraction of the machines hit (0 to 1), or Count of them; Fraction wins when both are set.
	Fraction float64 `yaml:"fraction"`
	Count    int     `yaml:"count"`
	// After is when the fault starts, counted from the end of the join phase once the joined
	// machines hold their sessions (or 30 s after it, if some never do).
	After time.Duration `yaml:"after"`
	// Every repeats the fault (disconnect, crash, latency: a fresh random choice of machines each
	// time; flap: the same machines); zero means once. Flap defaults to 10s.
	Every time.Duration `yaml:"every"`
	// For is how long it lasts: latency's delay, a crashed machine's downtime (default 5s),
	// flapping; zero means until the end (latency, flap).
	For time.Duration `yaml:"for"`
	// Delay is added to every write on the connections of a machine with latency.
	Delay time.Duration `yaml:"delay"`
	// Skew offsets the clock the machine reports (in hellos and heartbeats); negative is behind.
	Skew time.Duration `yaml:"skew"`
}

// DefaultCrashDowntime is how long a crashed machine stays down when the fault does not say.
const DefaultCrashDowntime = 5 * time.Second

// DefaultFlapEvery is the period of flapping when the fault does not say.
const DefaultFlapEvery = 10 * time.Second

// ParseScenario reads a scenario in YAML or JSON (JSON is YAML); unknown keys are errors.
func ParseScenario(data []byte) (Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return Scenario{}, fmt.Errorf("scenario: %w", err)
	}
	return s, s.Validate()
}

// LoadScenario reads a scenario file.
func LoadScenario(path string) (Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Scenario{}, err
	}
	s, err := ParseScenario(data)
	if err != nil {
		return Scenario{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// ParseFault reads a fault from its flag form, "kind,key=value,...", with the keys of the
// scenario format: "disconnect,fraction=0.1,every=30s", "latency,count=5,delay=200ms",
// "skew,fraction=0.05,skew=-90s".
func ParseFault(s string) (Fault, error) {
	parts := strings.Split(s, ",")
	f := Fault{Kind: strings.TrimSpace(parts[0])}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return Fault{}, fmt.Errorf("fault %q: %q is not key=value", s, p)
		}
		var err error
		switch k {
		case "fraction":
			f.Fraction, err = strconv.ParseFloat(v, 64)
		case "count":
			f.Count, err = strconv.Atoi(v)
		case "after":
			f.After, err = time.ParseDuration(v)
		case "every":
			f.Every, err = time.ParseDuration(v)
		case "for":
			f.For, err = time.ParseDuration(v)
		case "delay":
			f.Delay, err = time.ParseDuration(v)
		case "skew":
			f.Skew, err = time.ParseDuration(v)
		default:
			return Fault{}, fmt.Errorf("fault %q: unknown key %q (fraction, count, after, every, for, delay, skew)", s, k)
		}
		if err != nil {
			return Fault{}, fmt.Errorf("fault %q: %s: %w", s, k, err)
		}
	}
	return f, (&Scenario{Faults: []Fault{f}}).Validate()
}

// Validate checks every fault, naming the first bad one.
func (s *Scenario) Validate() error {
	for i, f := range s.Faults {
		if err := f.validate(); err != nil {
			return fmt.Errorf("faults[%d] (%s): %w", i, f.Kind, err)
		}
	}
	return nil
}

func (f Fault) validate() error {
	switch f.Kind {
	case FaultDisconnect, FaultCrash, FaultFlap:
	case FaultLatency:
		if f.Delay <= 0 {
			return errors.New("delay: must be positive")
		}
	case FaultSkew:
		if f.Skew == 0 {
			return errors.New("skew: must not be zero")
		}
		if f.After != 0 || f.Every != 0 || f.For != 0 {
			return errors.New("skew applies from the start: after, every and for are not supported")
		}
	default:
		return fmt.Errorf("kind: want one of %s, %s, %s, %s, %s", FaultDisconnect, FaultLatency, FaultCrash, FaultSkew, FaultFlap)
	}
	switch {
	case math.IsNaN(f.Fraction) || f.Fraction < 0 || f.Fraction > 1:
		return errors.New("fraction: must be between 0 and 1")
	case f.Count < 0:
		return errors.New("count: must not be negative")
	case f.Fraction == 0 && f.Count == 0:
		return errors.New("set fraction or count")
	case f.After < 0 || f.Every < 0 || f.For < 0 || f.Delay < 0:
		return errors.New("durations must not be negative")
	}
	return nil
}

// machines is how many of n machines the fault hits.
func (f Fault) machines(n int) int {
	if f.Fraction > 0 {
		return min(n, max(1, int(math.Round(f.Fraction*float64(n)))))
	}
	return min(n, f.Count)
}
