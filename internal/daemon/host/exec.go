package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
)

// Exec limits.
const (
	// DefaultMaxOutput is how much of each of stdout and stderr an exec keeps unless its payload
	// asks for another cap; MaxOutput is the most it may ask for.
	DefaultMaxOutput = 64 << 10
	MaxOutput        = command.MaxExecOutput
	// MaxArgs and MaxArgBytes bound an exec's argv: how many strings, and their total length.
	MaxArgs     = command.MaxExecArgs
	MaxArgBytes = command.MaxExecArgBytes
	// MaxEnv bounds how many variables an exec's payload sets, MaxEnvValue each one's value.
	MaxEnv      = command.MaxExecEnv
	MaxEnvValue = command.MaxExecEnvValue
	// maxDir bounds an exec's working directory (PATH_MAX).
	maxDir = command.MaxExecPath
	// ExecPath is the PATH every exec'd program gets; a payload cannot change it.
	ExecPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// ExecPolicy says which programs exec may run: exactly the absolute paths listed (argv[0] must
// be one of them, written the same way), and only when the file argv[0] resolves to (following
// every symlink) is a listed program too, a regular file that only its owner (root or bcd's
// user) may write. An empty policy allows nothing.
type ExecPolicy struct {
	Allow []string
}

// NewExecPolicy checks an allow list: every entry a clean absolute path.
func NewExecPolicy(allow []string) (ExecPolicy, error) {
	var p ExecPolicy
	for _, a := range allow {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if !filepath.IsAbs(a) || filepath.Clean(a) != a {
			return p, fmt.Errorf("exec allow list: %q is not a clean absolute path", a)
		}
		if !slices.Contains(p.Allow, a) {
			p.Allow = append(p.Allow, a)
		}
	}
	slices.Sort(p.Allow)
	return p, nil
}

// Allows reports whether argv0 is written as one of the policy's programs. It is the first
// check of Resolve, which also follows symlinks.
func (p ExecPolicy) Allows(argv0 string) bool {
	return filepath.IsAbs(argv0) && filepath.Clean(argv0) == argv0 && slices.Contains(p.Allow, argv0)
}

// ErrNotAllowed is the error of an exec the node's policy refuses; the program is not run.
var ErrNotAllowed = errors.New("not allowed by this node's exec policy")

// Resolve returns the file exec runs for argv0, or an error wrapping ErrNotAllowed: argv0 must
// be listed as written, and the file it resolves to (every symlink followed) must be a listed
// program too (an entry whose last element is not a symlink, its directories resolved), so a
// listed path that is, or becomes, a symlink to another program runs nothing. The file must be
// a regular, executable file owned by root or by bcd's user and writable by no one else.
func (p ExecPolicy) Resolve(argv0 string) (string, error) {
	if !p.Allows(argv0) {
		allowed := "nothing"
		if len(p.Allow) > 0 {
			allowed = strings.Join(p.Allow, ", ")
		}
		return "", fmt.Errorf("exec %s: %w (it allows %s); not run", argv0, ErrNotAllowed, allowed)
	}
	real, err := filepath.EvalSymlinks(argv0)
	if err != nil {
		return "", fmt.Errorf("exec %s: %w; not run", argv0, err)
	}
	if !slices.ContainsFunc(p.Allow, func(a string) bool { return resolveDir(a) == real }) {
		return "", fmt.Errorf("exec %s: it is a symlink to %s, which is %w; not run", argv0, real, ErrNotAllowed)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("exec %s: %w; not run", argv0, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("exec %s: %s is not an executable file; not run", argv0, real)
	case fi.Mode().Perm()&0o022 != 0:
		return "", fmt.Errorf("exec %s: %s is writable by others than its owner (mode %04o), so it is %w; not run", argv0, real, fi.Mode().Perm(), ErrNotAllowed)
	case !ok || (st.Uid != 0 && int(st.Uid) != os.Geteuid()):
		return "", fmt.Errorf("exec %s: %s is owned by another user than root or bcd's, so it is %w; not run", argv0, real, ErrNotAllowed)
	}
	return real, nil
}

// resolveDir is path with its directory's symlinks resolved and its last element kept: where
// the program an allow-list entry names is, when that entry is not itself a symlink. It is ""
// when the directory does not resolve.
func resolveDir(path string) string {
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return ""
	}
	return filepath.Join(dir, filepath.Base(path))
}

// execRequest is the payload of an exec command.
type execRequest struct {
	argv      []string
	env       []string
	dir       string
	timeout   time.Duration
	maxOutput int
}

func parseExec(p *daemonv1.ExecPayload) (execRequest, error) {
	r := execRequest{dir: "/", maxOutput: DefaultMaxOutput}
	if p.GetPath() == "" {
		return r, errors.New(`exec: the payload needs "path", the program's absolute path`)
	}
	r.argv = append([]string{p.GetPath()}, p.GetArgs()...)
	if len(r.argv) > MaxArgs {
		return r, fmt.Errorf("exec: path and args are %d strings; at most %d", len(r.argv), MaxArgs)
	}
	total := 0
	for i, s := range r.argv {
		if strings.ContainsRune(s, 0) {
			return r, fmt.Errorf("exec: argv[%d] contains NUL", i)
		}
		if total += len(s); total > MaxArgBytes {
			return r, fmt.Errorf("exec: argv is longer than %d bytes", MaxArgBytes)
		}
	}
	// The program starts from a clean environment: the fixed PATH, and only the variables the
	// payload sets that no loader, shell or interpreter reads code from.
	env := p.GetEnv()
	if len(env) > MaxEnv {
		return r, fmt.Errorf("exec: env sets %d variables; at most %d", len(env), MaxEnv)
	}
	for k, v := range env {
		if err := checkExecEnv(k, v); err != nil {
			return r, err
		}
		r.env = append(r.env, k+"="+v)
	}
	slices.Sort(r.env)
	r.env = append([]string{"PATH=" + ExecPath}, r.env...)
	if d := p.GetDir(); d != "" {
		r.dir = d
		if !filepath.IsAbs(r.dir) || len(r.dir) > maxDir {
			return r, fmt.Errorf("exec: dir is not an absolute path of at most %d bytes", maxDir)
		}
	}
	if p.TimeoutSeconds != nil {
		s := p.GetTimeoutSeconds()
		if !(s > 0) {
			return r, errors.New("exec: timeout_seconds must be positive")
		}
		r.timeout = time.Duration(min(s, 1e9) * float64(time.Second))
	}
	if p.MaxOutputBytes != nil {
		n := p.GetMaxOutputBytes()
		if n < 0 || n > MaxOutput {
			return r, fmt.Errorf("exec: max_output_bytes must be between 0 and %d", MaxOutput)
		}
		r.maxOutput = int(n)
	}
	return r, nil
}

// Exec runs a program the policy allows, with the payload (as JSON)
//
//	{"path": "/bin/echo", "args": ["hello"], "env": {"K": "V"}, "dir": "/", "timeoutSeconds": 30,
//	 "maxOutputBytes": 65536}
//
// (only path is required; the program's argv is path followed by args; env may set only LANG, LANGUAGE, NO_COLOR, TZ and LC_*). The
// program (see Resolve) gets exactly that environment plus the fixed PATH ExecPath, nothing of
// the daemon's own, no stdin, its own process group (killed as a whole on timeout), and at most
// maxOutputBytes of each of stdout and stderr are kept. The result is
//
//	{"exitCode": 0, "stdout": "hello\n", "stderr": "", "stdoutTruncated": false,
//	 "stderrTruncated": false, "durationSeconds": 0.002}
//
// and a non-zero exit, a signal or a timeout fail the command with that result attached.
func (p ExecPolicy) Exec(ctx context.Context, payload *daemonv1.ExecPayload) (*structpb.Struct, error) {
	r, err := parseExec(payload)
	if err != nil {
		return nil, err
	}
	program, err := p.Resolve(r.argv[0])
	if err != nil {
		return nil, err
	}
	// ctx ends at the command's deadline; run also ends at the payload's timeout.
	run := ctx
	if r.timeout > 0 {
		var cancel context.CancelFunc
		run, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	stdout, stderr := &capped{max: r.maxOutput}, &capped{max: r.maxOutput}
	// The resolved file runs, so that a symlink swapped after the check changes nothing.
	cmd := &exec.Cmd{Path: program, Args: r.argv, Env: r.env, Dir: r.dir, Stdout: stdout, Stderr: stderr}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("exec %s: %w", r.argv[0], err)
	}
	// Stop the whole process group when the deadline passes, not only the program: whatever it
	// started would otherwise hold the output open and outlive the command.
	waited := make(chan struct{})
	go func() {
		select {
		case <-run.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-waited:
		}
	}()
	cmd.WaitDelay = 2 * time.Second
	werr := cmd.Wait()
	close(waited)
	res := map[string]any{
		"exitCode":        cmd.ProcessState.ExitCode(),
		"stdout":          stdout.String(),
		"stderr":          stderr.String(),
		"stdoutTruncated": stdout.truncated(),
		"stderrTruncated": stderr.truncated(),
		"durationSeconds": time.Since(start).Seconds(),
	}
	out, err := structpb.NewStruct(res)
	if err != nil {
		return nil, fmt.Errorf("exec %s: encode result: %w", r.argv[0], err)
	}
	switch {
	case werr == nil:
		return out, nil
	case ctx.Err() != nil:
		return out, fmt.Errorf("exec %s: killed: the command's deadline passed", r.argv[0])
	case run.Err() != nil:
		return out, fmt.Errorf("exec %s: timed out after %s and was killed", r.argv[0], r.timeout)
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return out, fmt.Errorf("exec %s: killed by signal %s", r.argv[0], ws.Signal())
		}
		return out, fmt.Errorf("exec %s: exit status %d", r.argv[0], ee.ExitCode())
	}
	return out, fmt.Errorf("exec %s: %w", r.argv[0], werr)
}

// capped keeps the first max bytes written to it and counts the rest. over, when set, is called
// once, when the output first passes max: a caller that refuses such output stops the program
// there instead of letting it run on.
type capped struct {
	buf   bytes.Buffer
	max   int
	total int
	over  func()
}

func (c *capped) Write(p []byte) (int, error) {
	c.total += len(p)
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	if c.over != nil && c.total > c.max && c.total-len(p) <= c.max {
		c.over()
	}
	return len(p), nil
}

func (c *capped) truncated() bool { return c.total > c.buf.Len() }

// String is the kept output as valid UTF-8 (results are JSON); a cut through a character, or
// binary output, shows as U+FFFD.
func (c *capped) String() string { return strings.ToValidUTF8(c.buf.String(), "\uFFFD") }
