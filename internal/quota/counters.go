package quota

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/internal/apierr"
)

// CommandsRefusal turns the refusal of CommandReserver.Reserve into ResourceExhausted naming the
// cap that ctx carries, with Retry-After saying when the oldest second of the minute leaves it
// (unless the create alone is over the cap); added is how many commands the create reserved. ok
// is false for any other error, which the caller handles.
func CommandsRefusal(ctx context.Context, err error, added int) (refusal error, ok bool) {
	var r *commandsRefused
	if !errors.As(err, &r) {
		return nil, false
	}
	most := LimitsFrom(ctx).Of(CommandsPerMinute)
	msg := fmt.Sprintf("%s: the tenant created %d commands in the last minute and this call adds %d; at most %d a minute",
		CommandsPerMinute.Key(), r.total-int64(added), added, most)
	if added > most {
		return &apierr.Error{Code: connect.CodeResourceExhausted, Msg: msg + "; address fewer nodes"}, true
	}
	cerr := connect.NewError(connect.CodeResourceExhausted, errors.New(msg))
	cerr.Meta().Set("Retry-After", strconv.FormatInt(max(1, r.retry), 10))
	return cerr, true
}

// JoinRefusal turns the refusal of a join's last statement (AdmitJoin, the database's
// join_admit) over the cap of most nodes into the cap's ResourceExhausted: ok is false for
// any other error, which the caller handles. most is the cap the join passed to AdmitJoin.
func JoinRefusal(err error, most int) (refusal error, ok bool) {
	d, ok := guardDetail(err, Nodes, 1)
	if !ok {
		return nil, false
	}
	if d == nil {
		return fmt.Errorf("tenant cap %s: the database's refusal has no count: %w", Nodes, err), true
	}
	return over(Nodes, int64(most), d[0]-1, 1), true
}

// guardDetail says whether err is the refusal by a counter guard of migration 0025 for limit (a
// check_violation naming constraint tenant_cap_<limit>), and returns the n numbers of its
// DETAIL, nil when they do not parse.
func guardDetail(err error, limit Limit, n int) ([]int64, bool) {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != checkViolation || pg.ConstraintName != "tenant_cap_"+string(limit) {
		return nil, false
	}
	fields := strings.Fields(pg.Detail)
	if len(fields) != n {
		return nil, true
	}
	d := make([]int64, n)
	for i, f := range fields {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return nil, true
		}
		d[i] = v
	}
	return d, true
}

// checkViolation is the SQLSTATE the counter guards of migration 0025 raise.
const checkViolation = "23514"
