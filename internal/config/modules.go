package config

import (
	"fmt"
	"reflect"

	"go.yaml.in/yaml/v3"
)

// ModuleConfig is one entry of modules: the name of a module to enable and its configuration
// section. In the file an entry is either the name alone or a mapping {name, config}; the
// environment (BETTER_COMPUTE_MODULES, comma separated) gives names only.
type ModuleConfig struct {
	// Name is the module's name, as the binary registers it.
	Name string
	// section is the YAML under the entry's config key (nil without one), and env the
	// environment that ${NAME} references in it resolve from.
	section *yaml.Node
	env     map[string]string
}

// String is the module's name, so a configuration prints without module sections (which may hold
// credentials).
func (m ModuleConfig) String() string { return m.Name }

// HasSection reports whether the entry has a config section.
func (m ModuleConfig) HasSection() bool { return m.section != nil }

// Decode decodes the entry's config section into v, a pointer to a struct with yaml tags, by the
// rules of the whole file: unknown keys, values of the wrong type and unset ${NAME} references
// are problems, named under key (for example "modules[0].config", giving
// "modules[0].config.url"). Without a section v is left as it is.
func (m ModuleConfig) Decode(key string, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config: decode module %s: want a pointer to a struct, got %T", m.Name, v)
	}
	if m.section == nil {
		return nil
	}
	var ps problems
	d := decoder{env: m.env, problems: &ps}
	d.mapping(m.section, rv.Elem(), key)
	if len(ps) > 0 {
		return &Error{Problems: ps}
	}
	return nil
}

var moduleConfigsType = reflect.TypeFor[[]ModuleConfig]()

// modules decodes the modules list.
func (d *decoder) modules(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.SequenceNode {
		d.problems.add(key, "must be a list of module names, or of {name, config}, not %s", kindName(n.Kind))
		return
	}
	out := make([]ModuleConfig, 0, len(n.Content))
	for i, item := range n.Content {
		k := fmt.Sprintf("%s[%d]", key, i)
		item = resolveAlias(item)
		m := ModuleConfig{env: d.env}
		switch {
		case isNull(item):
		case item.Kind == yaml.ScalarNode:
			d.scalar(item, reflect.ValueOf(&m.Name).Elem(), k)
		case item.Kind == yaml.MappingNode:
			for j := 0; j+1 < len(item.Content); j += 2 {
				kn, vn := item.Content[j], resolveAlias(item.Content[j+1])
				switch kn.Value {
				case "name":
					d.scalar(vn, reflect.ValueOf(&m.Name).Elem(), k+".name")
				case "config":
					if !isNull(vn) {
						m.section = vn
					}
				default:
					d.problems.add(k+"."+kn.Value, "unknown key (an entry has name and config)")
				}
			}
		default:
			d.problems.add(k, "must be a module name or {name, config}, not %s", kindName(item.Kind))
		}
		out = append(out, m)
	}
	v.Set(reflect.ValueOf(out))
}

// checkModules checks the names: set and each once. Whether the binary has them is the
// process's to say (package module), which names the entry too.
func (c *Config) checkModules(ps *problems) {
	seen := map[string]bool{}
	for i, m := range c.Modules {
		k := fmt.Sprintf("modules[%d]", i)
		switch {
		case m.Name == "":
			ps.add(k, "must not be empty: name a module")
		case seen[m.Name]:
			ps.add(k, "module %s is listed twice", m.Name)
		}
		seen[m.Name] = true
	}
}
