package apierr_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/better-compute/better-compute/internal/apierr"
)

// violations returns the field violations of cerr's BadRequest details, as "field: description".
func violations(t *testing.T, cerr *connect.Error) []string {
	t.Helper()
	var out []string
	for _, d := range cerr.Details() {
		v, err := d.Value()
		if err != nil {
			t.Fatalf("detail %s: %v", d.Type(), err)
		}
		br, ok := v.(*errdetails.BadRequest)
		if !ok {
			t.Fatalf("detail %s, want google.rpc.BadRequest", d.Type())
		}
		for _, fv := range br.GetFieldViolations() {
			out = append(out, fv.GetField()+": "+fv.GetDescription())
		}
	}
	return out
}

func TestToConnectCarriesFieldViolations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		code connect.Code
		msg  string
		want []string
	}{
		{"invalid argument", apierr.InvalidArgument("pool_id", "must be a UUID, got %q", "x"),
			connect.CodeInvalidArgument, `pool_id: must be a UUID, got "x"`, []string{`pool_id: must be a UUID, got "x"`}},
		{"wrapped", fmt.Errorf("create: %w", apierr.InvalidArgument("tolerations[0].operator", "must be Equal or Exists")),
			connect.CodeInvalidArgument, "tolerations[0].operator: must be Equal or Exists", []string{"tolerations[0].operator: must be Equal or Exists"}},
		{"parse id", func() error { _, err := apierr.ParseID("id", "nope"); return err }(),
			connect.CodeInvalidArgument, `id: must be a UUID, got "nope"`, []string{`id: must be a UUID, got "nope"`}},
		{"failed precondition with a field", apierr.FailedPreconditionField("gpus", "the pool has 8"),
			connect.CodeFailedPrecondition, "gpus: the pool has 8", []string{"gpus: the pool has 8"}},
		{"no field, no detail", apierr.FailedPrecondition("node is retired"),
			connect.CodeFailedPrecondition, "node is retired", nil},
		{"not found", apierr.NotFound("lease %s not found", "l1"), connect.CodeNotFound, "lease l1 not found", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cerr, internal := apierr.ToConnect(tc.err, "req-1")
			if internal || cerr.Code() != tc.code || cerr.Message() != tc.msg {
				t.Fatalf("ToConnect = %v (internal %v), want %v %q", cerr, internal, tc.code, tc.msg)
			}
			if got := violations(t, cerr); !slices.Equal(got, tc.want) {
				t.Errorf("violations %q, want %q", got, tc.want)
			}
		})
	}
}

func TestJoin(t *testing.T) {
	t.Parallel()
	if err := apierr.Join(nil, nil); err != nil {
		t.Errorf("Join of nils = %v", err)
	}
	one := apierr.InvalidArgument("name", "is required")
	if err := apierr.Join(nil, one, nil); err != one { //nolint:errorlint // Join returns this very error
		t.Errorf("Join of one error = %v, want it unchanged", err)
	}

	err := apierr.Join(
		apierr.InvalidArgument("pool_id", "must be a UUID"),
		nil,
		apierr.InvalidArgument("start_time", "is required"),
		apierr.InvalidArgument("end_time", "is required"),
	)
	cerr, internal := apierr.ToConnect(err, "req-1")
	if internal || cerr.Code() != connect.CodeInvalidArgument {
		t.Fatalf("ToConnect(Join) = %v", cerr)
	}
	if want := "pool_id: must be a UUID; start_time: is required; end_time: is required"; cerr.Message() != want {
		t.Errorf("message %q, want %q", cerr.Message(), want)
	}
	want := []string{"pool_id: must be a UUID", "start_time: is required", "end_time: is required"}
	if got := violations(t, cerr); !slices.Equal(got, want) {
		t.Errorf("violations %q, want %q", got, want)
	}

	// An unexpected error is not hidden behind bad fields; mixed codes keep the first error.
	boom := errors.New("database down")
	if err := apierr.Join(one, boom); err != boom { //nolint:errorlint // Join returns this very error
		t.Errorf("Join with an unexpected error = %v, want it", err)
	}
	pre := apierr.FailedPreconditionField("gpus", "too many")
	if err := apierr.Join(pre, one); err != pre { //nolint:errorlint // Join returns this very error
		t.Errorf("Join of mixed codes = %v, want the first", err)
	}
}

// No rows is not NotFound by itself: only handlers that expect it say what was not found.
func TestNoRowsIsInternalUnlessExpected(t *testing.T) {
	t.Parallel()
	cerr, internal := apierr.ToConnect(fmt.Errorf("read tenant: %w", pgx.ErrNoRows), "req-7")
	if !internal || cerr.Code() != connect.CodeInternal || cerr.Message() != "internal error (request id req-7)" {
		t.Errorf("unexpected no rows: %v (internal %v), want internal", cerr, internal)
	}
	cerr, internal = apierr.ToConnect(apierr.NotFoundIfNoRows(pgx.ErrNoRows, "pool %s not found", "p1"), "req-8")
	if internal || cerr.Code() != connect.CodeNotFound || cerr.Message() != "pool p1 not found" {
		t.Errorf("expected no rows: %v (internal %v), want not found", cerr, internal)
	}
	if err := apierr.NotFoundIfNoRows(errors.New("boom"), "x"); err.Error() != "boom" {
		t.Errorf("NotFoundIfNoRows changed another error: %v", err)
	}
}
