package cli_test

import (
	"bytes"
	"errors"
	"testing"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/internal/cli"
)

// TestPrintErrorSaysWhenToRetry: a refusal with a Retry-After (one the client did not wait for)
// tells the person how long to wait, and exits with the retry-later code.
func TestPrintErrorSaysWhenToRetry(t *testing.T) {
	t.Parallel()
	cerr := connect.NewError(connect.CodeResourceExhausted, errors.New("quota of calls per minute reached"))
	cerr.Meta().Set("Retry-After", "42")
	var out bytes.Buffer
	cli.PrintError(&out, cerr)
	if want := "error: resource_exhausted: quota of calls per minute reached\n  retry after 42s\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	if code := cli.ExitCode(cerr); code != cli.ExitRetry {
		t.Errorf("exit code %d, want %d", code, cli.ExitRetry)
	}
}
