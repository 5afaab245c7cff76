// Package moduleset assembles modules with a deployment: the modules a program registers
// (Registry), enabled and configured from the configuration's modules key (Set), and their
// contributions in the forms the roles take. Only the assembly (internal/process, the CLI, dev
// mode) uses it; the roles take plain values.
package moduleset

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/module"
)

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// Registry is the modules a binary has, in the order its main lists them.
type Registry []module.Info

// Names lists the registered modules.
func (r Registry) Names() []string {
	out := make([]string, len(r))
	for i, in := range r {
		out[i] = in.Name
	}
	return out
}

// Files are the proto files of every registered module's API services, enabled or not: what the
// CLI can call and the API reference describes. The instances made to ask are not configured.
func (r Registry) Files() []protoreflect.FileDescriptor {
	set := make(Set, len(r))
	for i, in := range r {
		set[i] = in.New()
	}
	return set.Files()
}

// Enable makes and configures the modules cfgs names, in order. Every problem is reported at
// once, each naming its key: modules[i] for a module this binary does not have,
// modules[i].config.<key> for its configuration.
func (r Registry) Enable(cfgs []config.ModuleConfig) (Set, error) {
	var (
		set  Set
		errs []error
	)
	for i, c := range cfgs {
		key := fmt.Sprintf("modules[%d]", i)
		at := slices.IndexFunc(r, func(in module.Info) bool { return in.Name == c.Name })
		if at < 0 {
			have := "none"
			if len(r) > 0 {
				have = strings.Join(r.Names(), ", ")
			}
			errs = append(errs, fmt.Errorf("%s: this binary has no module %q (it has %s)", key, c.Name, have))
			continue
		}
		m := r[at].New()
		if err := configure(m, c, key+".config"); err != nil {
			errs = append(errs, err)
			continue
		}
		set = append(set, m)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("modules: %w", err)
	}
	return set, nil
}

// configure decodes and validates a module's section.
func configure(m module.Module, c config.ModuleConfig, key string) error {
	cm, ok := m.(module.Configurable)
	if !ok {
		if c.HasSection() {
			return fmt.Errorf("%s: module %s takes no configuration", key, m.Name())
		}
		return nil
	}
	if err := c.Decode(key, cm.Config()); err != nil {
		return err
	}
	err := cm.Validate()
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range flatten(err) {
		if fe, ok := errors.AsType[*module.FieldError](e); ok {
			errs = append(errs, fmt.Errorf("%s.%s: %s", key, fe.Key, fe.Message))
		} else {
			errs = append(errs, fmt.Errorf("%s: %w", key, e))
		}
	}
	return errors.Join(errs...)
}

// flatten undoes errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// Check that the registry's names are well formed and unique; a binary with a bad registry is a
// programming error, reported at start.
func (r Registry) Validate() error {
	seen := map[string]bool{}
	for _, in := range r {
		if !namePattern.MatchString(in.Name) || in.New == nil || seen[in.Name] {
			return fmt.Errorf("module registry: %q is not a well-formed, unique module with a constructor", in.Name)
		}
		seen[in.Name] = true
	}
	return nil
}
