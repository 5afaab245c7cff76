package command

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/release"
)

// Bounds of the typed payloads. Validate enforces them where a payload enters (commands/create,
// the NodeSpec), and bcd again where it runs (its own policy on top).
const (
	// MaxExecArgs and MaxExecArgBytes bound an exec's argv (path and args): how many strings,
	// and their total length.
	MaxExecArgs     = 1024
	MaxExecArgBytes = 128 << 10
	// MaxExecEnv bounds how many variables an exec sets, MaxExecEnvValue each one's value.
	MaxExecEnv      = 32
	MaxExecEnvValue = 256
	// MaxExecPath bounds an exec's path and working directory (PATH_MAX).
	MaxExecPath = 4096
	// MaxExecOutput is the most of each of stdout and stderr an exec may ask to keep.
	MaxExecOutput = 1 << 20
	// MaxStructBytes bounds a configure's config and an echo's data, as JSON.
	MaxStructBytes = 64 << 10
	// MaxDiagnoseLevel is DCGM's longest diagnostic level (hours of stress).
	MaxDiagnoseLevel = 4
	// maxGPUUUID bounds a GPU UUID (GPU- and 36 characters; MIG ones are longer).
	maxGPUUUID = 128
)

// gpuUUID is a GPU's UUID as nvidia-smi prints it: "GPU-" (or "MIG-") and hex groups.
var gpuUUID = regexp.MustCompile(`^(GPU|MIG)-[0-9A-Fa-f-]{1,123}$`)

// payloads maps each type to its payload message; the oneofs of the daemon protocol's Command
// and of commands/create, get and list have one field per entry, named for the type (the test
// checks that they agree).
var payloads = map[string]proto.Message{
	Exec:             &daemonv1.ExecPayload{},
	CollectInventory: &daemonv1.CollectInventoryPayload{},
	Drain:            &daemonv1.DrainPayload{},
	Undrain:          &daemonv1.UndrainPayload{},
	Upgrade:          &daemonv1.UpgradePayload{},
	Reboot:           &daemonv1.RebootPayload{},
	Configure:        &daemonv1.ConfigurePayload{},
	Echo:             &daemonv1.EchoPayload{},
	GpuReset:         &daemonv1.GpuResetPayload{},
	Diagnose:         &daemonv1.DiagnosePayload{},
}

// oneofName is the oneof that carries a command's payload in every message that has one.
const oneofName = "payload"

// TypeOf returns the type of a payload message (an *daemonv1.ExecPayload is an "exec"), or ""
// for any other message.
func TypeOf(p proto.Message) string {
	if p == nil {
		return ""
	}
	name := p.ProtoReflect().Descriptor().FullName()
	for typ, m := range payloads {
		if m.ProtoReflect().Descriptor().FullName() == name {
			return typ
		}
	}
	return ""
}

// PayloadOf returns the typed payload set in m's "payload" oneof (a daemon Command, a
// commands/create request or an API Command) and its type; ("", nil) when none is set or m has
// no such oneof.
func PayloadOf(m proto.Message) (string, proto.Message) {
	if m == nil {
		return "", nil
	}
	r := m.ProtoReflect()
	od := r.Descriptor().Oneofs().ByName(oneofName)
	if od == nil {
		return "", nil
	}
	fd := r.WhichOneof(od)
	if fd == nil || fd.Message() == nil {
		return "", nil
	}
	p := r.Get(fd).Message().Interface()
	if typ := TypeOf(p); typ == fd.JSONName() {
		return typ, p
	}
	return "", nil
}

// SetPayload sets m's "payload" oneof to p, a payload message of a known type.
func SetPayload(m, p proto.Message) error {
	typ := TypeOf(p)
	if typ == "" {
		return fmt.Errorf("command: %T is not a command payload", p)
	}
	r := m.ProtoReflect()
	od := r.Descriptor().Oneofs().ByName(oneofName)
	if od == nil {
		return fmt.Errorf("command: %s has no payload oneof", r.Descriptor().FullName())
	}
	fields := od.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.JSONName() == typ {
			r.Set(fd, protoreflect.ValueOfMessage(p.ProtoReflect()))
			return nil
		}
	}
	return fmt.Errorf("command: %s cannot carry a %s payload", r.Descriptor().FullName(), typ)
}

// Encode is the JSON (protojson) of a payload, as commands.payload stores it.
func Encode(p proto.Message) ([]byte, error) {
	if TypeOf(p) == "" {
		return nil, fmt.Errorf("command: %T is not a command payload", p)
	}
	b, err := protojson.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("command: encode %s payload: %w", TypeOf(p), err)
	}
	return b, nil
}

// Decode reads a stored payload of type typ. Fields it does not know are ignored, so that a row
// a newer version wrote still reads.
func Decode(typ string, b []byte) (proto.Message, error) {
	m, ok := payloads[typ]
	if !ok {
		return nil, fmt.Errorf("command: unknown type %q", typ)
	}
	p := m.ProtoReflect().New().Interface()
	if len(b) == 0 {
		return p, nil
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("command: decode %s payload: %w", typ, err)
	}
	return p, nil
}

// FieldError is a payload that breaks a bound: Field is the path of the offending field inside
// the payload ("path", "args[3]", "url"), for the API to name under its own prefix.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func bad(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Validate checks a payload against the bounds above: what any daemon could run, not what a
// node's policy allows (bcd decides that). An error is a *FieldError.
func Validate(p proto.Message) error {
	switch p := p.(type) {
	case *daemonv1.ExecPayload:
		return validateExec(p)
	case *daemonv1.UpgradePayload:
		return ValidateUpgrade(p.GetVersion())
	case *daemonv1.ConfigurePayload:
		if p.GetConfig() == nil {
			return bad("config", "required (a JSON object; {} for an empty configuration)")
		}
		return validateStruct("config", p.GetConfig())
	case *daemonv1.EchoPayload:
		return validateStruct("data", p.GetData())
	case *daemonv1.GpuResetPayload:
		if u := p.GetUuid(); !gpuUUID.MatchString(u) {
			return bad("uuid", "must be a GPU's UUID as nvidia-smi prints it (GPU-…, at most %d characters), got %q", maxGPUUUID, u)
		}
		return nil
	case *daemonv1.DiagnosePayload:
		if l := p.GetLevel(); l < 0 || l > MaxDiagnoseLevel {
			return bad("level", "must be 1 to %d (0 for 2), got %d", MaxDiagnoseLevel, l)
		}
		return nil
	case *daemonv1.DrainPayload, *daemonv1.UndrainPayload, *daemonv1.RebootPayload, *daemonv1.CollectInventoryPayload:
		return nil
	}
	return errors.New("command: not a command payload")
}

func validateExec(p *daemonv1.ExecPayload) error {
	path := p.GetPath()
	switch {
	case path == "":
		return bad("path", "required: the program's absolute path")
	case len(path) > MaxExecPath || !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsRune(path, 0):
		return bad("path", "must be a clean absolute path of at most %d bytes without NUL", MaxExecPath)
	}
	if n := len(p.GetArgs()) + 1; n > MaxExecArgs {
		return bad("args", "path and args are %d strings; at most %d", n, MaxExecArgs)
	}
	total := len(path)
	for i, a := range p.GetArgs() {
		if strings.ContainsRune(a, 0) {
			return bad(fmt.Sprintf("args[%d]", i), "must not contain NUL")
		}
		if total += len(a); total > MaxExecArgBytes {
			return bad("args", "path and args are longer than %d bytes", MaxExecArgBytes)
		}
	}
	if n := len(p.GetEnv()); n > MaxExecEnv {
		return bad("env", "sets %d variables; at most %d", n, MaxExecEnv)
	}
	for k, v := range p.GetEnv() {
		if k == "" || len(k) > MaxExecEnvValue || strings.ContainsAny(k, "=\x00") {
			return bad("env", "a variable's name must be 1 to %d bytes without '=' or NUL", MaxExecEnvValue)
		}
		if len(v) > MaxExecEnvValue || strings.ContainsRune(v, 0) {
			return bad("env["+k+"]", "at most %d bytes without NUL", MaxExecEnvValue)
		}
	}
	if d := p.GetDir(); d != "" && (!filepath.IsAbs(d) || len(d) > MaxExecPath || strings.ContainsRune(d, 0)) {
		return bad("dir", "must be an absolute path of at most %d bytes", MaxExecPath)
	}
	if p.TimeoutSeconds != nil && !(p.GetTimeoutSeconds() > 0 && p.GetTimeoutSeconds() <= 86400) {
		return bad("timeout_seconds", "must be positive and at most 86400")
	}
	if p.MaxOutputBytes != nil && (p.GetMaxOutputBytes() < 0 || p.GetMaxOutputBytes() > MaxExecOutput) {
		return bad("max_output_bytes", "must be between 0 and %d", MaxExecOutput)
	}
	return nil
}

// ValidateUpgrade checks the release version an upgrade names (a commands/create upgrade, a
// workflow's, a NodeSpec's daemon version): required, and a valid release version.
func ValidateUpgrade(version string) error {
	if version == "" {
		return bad("version", "required: the release version to upgrade to")
	}
	if err := release.ValidateVersion(version); err != nil {
		return bad("version", "%v", err)
	}
	return nil
}

func validateStruct(field string, m proto.Message) error {
	if m == nil {
		return nil
	}
	b, err := protojson.Marshal(m)
	if err != nil {
		return bad(field, "%v", err)
	}
	if len(b) > MaxStructBytes {
		return bad(field, "at most %d bytes as JSON, got %d", MaxStructBytes, len(b))
	}
	return nil
}
