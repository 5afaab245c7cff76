package moduleset_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/module"
)

// probe is a module for these tests: a configuration section and worker parts.
type probe struct {
	cfg struct {
		URL     string        `yaml:"url"`
		Timeout time.Duration `yaml:"timeout"`
		TLS     struct {
			CAFile string `yaml:"caFile"`
		} `yaml:"tls"`
	}
	sink string
}

func (p *probe) Name() string { return "probe" }
func (p *probe) Config() any  { return &p.cfg }
func (p *probe) Validate() error {
	var errs []error
	if p.cfg.URL == "" {
		errs = append(errs, &module.FieldError{Key: "url", Message: "required"})
	}
	if p.cfg.TLS.CAFile == "missing.pem" {
		errs = append(errs, &module.FieldError{Key: "tls.caFile", Message: "no such file"})
	}
	return errors.Join(errs...)
}
func (p *probe) Workers(module.Worker) (module.Workers, error) {
	return module.Workers{
		Jobs:  map[string][]module.Job{module.RoleControllers: {{Name: "tick", Run: func(context.Context) error { return nil }}}},
		Sinks: []module.Sink{namedSink(p.sink)},
	}, nil
}

// namedSink is a sink that only has a name.
type namedSink string

func (s namedSink) Name() string                              { return string(s) }
func (namedSink) Source() module.Source                       { return module.Source{} }
func (namedSink) Deliver(context.Context, module.Event) error { return nil }

// plain is a module without configuration.
type plain struct{}

func (plain) Name() string { return "plain" }

func registry(sink string) moduleset.Registry {
	return moduleset.Registry{
		{Name: "probe", New: func() module.Module { return &probe{sink: sink} }},
		{Name: "plain", New: func() module.Module { return plain{} }},
	}
}

func load(t *testing.T, yaml string, environ ...string) *config.Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, append(environ, "BETTER_COMPUTE_SECRET=module-test-secret-0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnableDecodesAndValidatesSections(t *testing.T) {
	t.Parallel()
	c := load(t, "modules:\n  - plain\n  - name: probe\n    config:\n      url: ${PROBE_URL}\n      timeout: 3s\n      tls: {caFile: ca.pem}\n", "PROBE_URL=nats://x:4222")
	set, err := registry("probe:events").Enable(c.Modules)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(set.Names(), ",") != "plain,probe" {
		t.Fatalf("enabled %v", set.Names())
	}
	p := set[1].(*probe)
	if p.cfg.URL != "nats://x:4222" || p.cfg.Timeout != 3*time.Second || p.cfg.TLS.CAFile != "ca.pem" {
		t.Errorf("decoded %+v", p.cfg)
	}
}

func TestEnableNamesEveryBadKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown module", "modules: [plain, nope]", []string{`modules[1]: this binary has no module "nope" (it has probe, plain)`}},
		{"unknown key", "modules:\n  - name: probe\n    config: {url: x, bogus: 1}", []string{"modules[0].config.bogus: unknown key"}},
		{"wrong type", "modules:\n  - name: probe\n    config: {url: x, timeout: soon}", []string{"modules[0].config.timeout: must be a duration"}},
		{"validation", "modules:\n  - name: probe\n    config: {tls: {caFile: missing.pem}}", []string{"modules[0].config.url: required", "modules[0].config.tls.caFile: no such file"}},
		{"no section wanted", "modules:\n  - name: plain\n    config: {a: 1}", []string{"modules[0].config: module plain takes no configuration"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := registry("probe:x").Enable(load(t, tc.yaml).Modules)
			if err == nil {
				t.Fatal("enabled, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestWorkersKeepModulesApart(t *testing.T) {
	t.Parallel()
	c := load(t, "modules:\n  - name: probe\n    config: {url: x}\n")
	set, err := registry("probe:events").Enable(c.Modules)
	if err != nil {
		t.Fatal(err)
	}
	w, err := set.Workers(module.Worker{Logger: nil})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Sinks) != 1 || w.Sinks[0].Name() != "probe:events" || w.Jobs["controllers"][0].Name != "module:probe:tick" {
		t.Errorf("workers %+v", w)
	}
	// A sink that would take another's cursor is refused.
	set, err = registry("webhook:0192").Enable(c.Modules)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Workers(module.Worker{}); err == nil || !strings.Contains(err.Error(), "must be named probe:<name>") {
		t.Errorf("a sink outside the module's names: %v", err)
	}
}

func TestRegistryValidate(t *testing.T) {
	t.Parallel()
	if err := registry("probe:x").Validate(); err != nil {
		t.Error(err)
	}
	bad := append(registry("probe:x"), module.Info{Name: "probe", New: func() module.Module { return plain{} }})
	if err := bad.Validate(); err == nil {
		t.Error("a registry naming a module twice is valid")
	}
}
