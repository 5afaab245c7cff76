package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/client"
)

// Exit codes of every better-compute command, by the class of error; scripts branch on them.
const (
	ExitOK = 0
	// ExitOther is any other failure.
	ExitOther = 1
	// ExitUsage is a bad flag, argument or --data: the command was not sent.
	ExitUsage = 2
	// ExitPaused is a workflow that paused while `workflow run` or `workflow status --watch`
	// followed it.
	ExitPaused = 3
	// ExitAuth is unauthenticated or permission_denied: a missing, wrong or too weak API key.
	ExitAuth = 4
	// ExitNotFound is not_found.
	ExitNotFound = 5
	// ExitRefused is a request the API refused as it stands: invalid_argument,
	// failed_precondition, out_of_range, already_exists, aborted.
	ExitRefused = 6
	// ExitRetry is unavailable, deadline_exceeded or resource_exhausted: try again later.
	ExitRetry = 7
)

// ExitCodesHelp documents the exit codes, for commands' help and docs/cli.md.
const ExitCodesHelp = `Exit codes:
  0  success
  1  any other failure
  2  usage: a bad flag, argument or --data (nothing was sent)
  3  a workflow paused (workflow run, workflow status --watch)
  4  unauthenticated or permission_denied
  5  not_found
  6  refused: invalid_argument, failed_precondition, out_of_range, already_exists, aborted
  7  retry later: unavailable, deadline_exceeded, resource_exhausted`

// ExitError ends a command with Code instead of the code its error class gives.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// usageError marks err as a usage error (exit code 2).
func usageError(err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// ExitCode is the process exit code for err: an *ExitError's code, else the class of its Connect
// code, else 1; 0 for nil.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if ee, ok := errors.AsType[*ExitError](err); ok {
		return ee.Code
	}
	if _, ok := errors.AsType[*connect.Error](err); !ok {
		return ExitOther
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied:
		return ExitAuth
	case connect.CodeNotFound:
		return ExitNotFound
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange,
		connect.CodeAlreadyExists, connect.CodeAborted:
		return ExitRefused
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted:
		return ExitRetry
	default:
		return ExitOther
	}
}

// PrintError writes err for a person: an API error as "error: <code>: <message>" and each bad
// field on a line of its own, then the wait a Retry-After asks for; any other error on one line after "better-compute: ".
func PrintError(w io.Writer, err error) {
	if cerr, ok := errors.AsType[*connect.Error](err); ok {
		fmt.Fprintf(w, "error: %s: %s\n", cerr.Code(), oneLine(cerr.Message()))
		for _, v := range client.FieldViolations(err) {
			fmt.Fprintf(w, "  %s: %s\n", v.Field, oneLine(v.Description))
		}
		if after, ok := client.RetryAfter(err); ok {
			fmt.Fprintf(w, "  retry after %s\n", after.Round(time.Second))
		}
		return
	}
	// One line, whatever the error: drivers report each address tried on a line of its own.
	fmt.Fprintln(w, "better-compute:", oneLine(err.Error()))
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
