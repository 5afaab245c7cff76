package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// envPrefix starts every environment variable that sets a key.
const envPrefix = "BETTER_COMPUTE_"

// Load reads the configuration: defaults, then the YAML file at path (none when path is ""),
// then the BETTER_COMPUTE_* variables in environ (os.Environ form; the last of duplicate names
// wins). ${NAME} references in the file are resolved from environ too, never from the process
// environment. It returns every problem found, as an *Error wrapped with the file's name.
func Load(path string, environ []string) (*Config, error) {
	return LoadOver(Default(), path, environ)
}

// LoadOver is Load starting from base instead of Default: a command with defaults of its own
// (dev's kept random secret) gives them here, so that the file and the environment still
// override them. base is modified and returned.
func LoadOver(base *Config, path string, environ []string) (*Config, error) {
	env := parseEnviron(environ)
	c := base
	var ps problems
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
		root, err := parseYAML(data)
		if err != nil {
			return nil, fmt.Errorf("parse config %s: %w", path, err)
		}
		if root != nil {
			d := decoder{env: env, problems: &ps}
			d.mapping(root, reflect.ValueOf(c).Elem(), "")
		}
	}
	applyEnv(c, env, &ps)
	for _, p := range c.problems() {
		if !ps.has(p.Key) { // a key that failed to load would only add noise
			ps = append(ps, p)
		}
	}
	if len(ps) > 0 {
		err := &Error{Problems: ps.scrub(c.Secret, databasePassword(c.Database.URL))}
		if path == "" {
			return nil, fmt.Errorf("config: %w", err)
		}
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return c, nil
}

// EnvVars lists the environment variable of every key, in the order of the Config struct.
func EnvVars() []string {
	var names []string
	for _, f := range leaves(reflect.TypeFor[Config](), "") {
		names = append(names, f.env)
	}
	return names
}

// problems collects what is wrong while loading goes on.
type problems []Problem

func (ps *problems) add(key, format string, args ...any) {
	*ps = append(*ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
}

func (ps problems) has(key string) bool {
	for _, p := range ps {
		if p.Key == key {
			return true
		}
	}
	return false
}

// scrub replaces any of secrets found in the messages, a last defence for errors that quote a
// value when an operator put the secret or the database password under the wrong key.
func (ps problems) scrub(secrets ...string) problems {
	for i := range ps {
		for _, s := range secrets {
			if s != "" {
				ps[i].Message = strings.ReplaceAll(ps[i].Message, s, redactedMark)
			}
		}
	}
	return ps
}

// parseEnviron turns os.Environ-style pairs into a map; later duplicates win, as with os/exec.
func parseEnviron(environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}

// parseYAML parses one YAML document and returns its top-level mapping, or nil when the file
// holds no settings.
func parseYAML(data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, errors.New("more than one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, nil
	}
	root := resolveAlias(doc.Content[0])
	if isNull(root) {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the top level must be a mapping of keys to values", root.Line)
	}
	return root, nil
}

// decoder copies a YAML tree into a struct, checking every key against the yaml tags and
// interpolating scalars one by one, so an interpolated value can never add YAML structure.
type decoder struct {
	env      map[string]string
	problems *problems
}

// value decodes n into v; a null leaves v at its default.
func (d *decoder) value(n *yaml.Node, v reflect.Value, key string) {
	n = resolveAlias(n)
	if isNull(n) {
		return
	}
	if v.Kind() == reflect.Struct {
		d.mapping(n, v, key)
		return
	}
	if _, ok := d.env[envName(key)]; ok {
		return // the environment overrides this key; its file value does not matter
	}
	switch {
	case v.Type() == moduleConfigsType:
		d.modules(n, v, key)
	case v.Kind() == reflect.Slice:
		d.list(n, v, key)
	default:
		d.scalar(n, v, key)
	}
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.MappingNode {
		d.problems.add(key, "must be a mapping of keys to values, not %s", kindName(n.Kind))
		return
	}
	fields := make(map[string]int)
	for i := range v.NumField() {
		if name := yamlName(v.Type().Field(i)); name != "" {
			fields[name] = i
		}
	}
	seen := make(map[string]int) // key name -> line
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		name := kn.Value
		k := joinKey(key, name)
		idx, ok := fields[name]
		switch {
		case kn.Kind != yaml.ScalarNode:
			d.problems.add(joinKey(key, "?"), "line %d: keys must be plain names", kn.Line)
		case !ok:
			d.problems.add(k, "unknown key%s", suggest(name, fields))
		case seen[name] != 0:
			d.problems.add(k, "set twice (lines %d and %d)", seen[name], kn.Line)
		default:
			seen[name] = kn.Line
			d.value(vn, v.Field(idx), k)
		}
	}
}

func (d *decoder) list(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.SequenceNode {
		d.problems.add(key, "must be a list, not %s", kindName(n.Kind))
		return
	}
	out := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		elem := reflect.New(v.Type().Elem()).Elem()
		if item = resolveAlias(item); !isNull(item) {
			d.scalar(item, elem, fmt.Sprintf("%s[%d]", key, i))
		}
		out = reflect.Append(out, elem)
	}
	v.Set(out)
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, key string) {
	if n.Kind != yaml.ScalarNode {
		d.problems.add(key, "must be a single value, not %s", kindName(n.Kind))
		return
	}
	s, err := interpolate(n.Value, d.env)
	if err != nil {
		d.problems.add(key, "%v", err)
		return
	}
	if err := setScalar(v, s); err != nil {
		d.problems.add(key, "%v", err)
	}
}

// applyEnv sets every key whose environment variable is present, even to "" (which clears a
// string or list). Lists are comma-separated; blanks around items are trimmed.
func applyEnv(c *Config, env map[string]string, ps *problems) {
	v := reflect.ValueOf(c).Elem()
	for _, f := range leaves(v.Type(), "") {
		s, ok := env[f.env]
		if !ok {
			continue
		}
		fv := v.FieldByIndex(f.index)
		if fv.Type() == moduleConfigsType {
			var ms []ModuleConfig
			for _, name := range splitList(s) {
				ms = append(ms, ModuleConfig{Name: name, env: env})
			}
			fv.Set(reflect.ValueOf(ms))
			continue
		}
		if fv.Kind() == reflect.Slice {
			fv.Set(reflect.ValueOf(splitList(s)))
			continue
		}
		if err := setScalar(fv, s); err != nil {
			ps.add(f.key, "%s: %v", f.env, err)
		}
	}
}

var durationType = reflect.TypeOf(time.Duration(0))

// setScalar parses s into a string, int, float or bool field. Errors do not quote s, which may hold the
// secret interpolated into the wrong key.
func setScalar(v reflect.Value, s string) error {
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return errors.New("must be a duration such as 90s, 15m or 168h")
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v.OverflowInt(n) {
			return errors.New("must be an integer")
		}
		v.SetInt(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return errors.New("must be a number")
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("must be true or false")
		}
		v.SetBool(b)
	default:
		panic(fmt.Sprintf("config: unsupported field kind %s", v.Kind()))
	}
	return nil
}

// splitList splits a comma-separated list, trimming blanks and dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// interpolate replaces ${NAME} and ${NAME:-default} with values from env; the default applies
// when NAME is unset or empty. $$ is a literal $, and a $ before anything else stays as it is.
// Errors never quote s, which may hold the secret.
func interpolate(s string, env map[string]string) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] != '$' || i+1 == len(s) || (s[i+1] != '$' && s[i+1] != '{') {
			b.WriteByte(s[i])
			i++
			continue
		}
		if s[i+1] == '$' {
			b.WriteByte('$')
			i += 2
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", errors.New(`unterminated "${": close it with "}" or write "$$" for a literal "$"`)
		}
		name, def, hasDef := strings.Cut(s[i+2:i+2+end], ":-")
		if !validVarName(name) {
			return "", errors.New(`invalid "${...}" reference: want ${NAME} or ${NAME:-default}, NAME of letters, digits and _`)
		}
		val, ok := env[name]
		switch {
		case hasDef && val == "":
			val = def
		case !ok:
			return "", fmt.Errorf("environment variable %s is not set", name)
		}
		b.WriteString(val)
		i += 2 + end + 1
	}
	return b.String(), nil
}

func validVarName(name string) bool {
	for i, r := range name {
		if r != '_' && !isASCIILetter(r) && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return name != ""
}

func isASCIILetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// field is one settable key of Config: a leaf of the struct tree.
type field struct {
	key   string // dotted YAML path, e.g. database.url
	env   string // its environment variable
	index []int  // for reflect.Value.FieldByIndex
}

// leaves lists the keys of struct type t by reflection, so keys and variables need no list kept
// by hand.
func leaves(t reflect.Type, prefix string) []field {
	return appendLeaves(nil, t, prefix, nil)
}

func appendLeaves(out []field, t reflect.Type, prefix string, index []int) []field {
	for i := range t.NumField() {
		name := yamlName(t.Field(i))
		if name == "" {
			continue
		}
		key := joinKey(prefix, name)
		idx := append(append([]int(nil), index...), i)
		if t.Field(i).Type.Kind() == reflect.Struct {
			out = appendLeaves(out, t.Field(i).Type, key, idx)
			continue
		}
		out = append(out, field{key: key, env: envName(key), index: idx})
	}
	return out
}

// yamlName is the key of a struct field, or "" for fields that are not keys.
func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if !f.IsExported() || name == "-" {
		return ""
	}
	return name
}

// envName turns a dotted key into its variable: database.url -> BETTER_COMPUTE_DATABASE_URL,
// baseURL -> BETTER_COMPUTE_BASE_URL, cors.allowedOrigins -> BETTER_COMPUTE_CORS_ALLOWED_ORIGINS.
func envName(key string) string {
	var b strings.Builder
	b.WriteString(envPrefix)
	for i, part := range strings.Split(key, ".") {
		if i > 0 {
			b.WriteByte('_')
		}
		r := []rune(part)
		for j, c := range r {
			// A word starts at an upper-case letter after a lower-case one or digit (baseURL), or
			// at the last capital of an acronym followed by lower case (URLPath -> URL_PATH).
			if j > 0 && unicode.IsUpper(c) && (!unicode.IsUpper(r[j-1]) ||
				j+1 < len(r) && unicode.IsLower(r[j+1])) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToUpper(c))
		}
	}
	return b.String()
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// suggest offers the known key that differs from name only in case.
func suggest(name string, fields map[string]int) string {
	for known := range fields {
		if strings.EqualFold(known, name) {
			return fmt.Sprintf(" (did you mean %s?)", known)
		}
	}
	return ""
}

// resolveAlias follows *alias references to the node they name.
func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// isNull reports an empty or null value (key:, key: ~, key: null), which keeps the default.
func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	default:
		return "an unsupported YAML node"
	}
}
