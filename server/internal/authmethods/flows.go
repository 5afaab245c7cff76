package authmethods

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/ratelimit"
)

// Defaults of FlowLimits.
const (
	DefaultFlowsPerAddress = 20
	DefaultFlowsPerMethod  = 10_000
	DefaultFlowsCountedFor = 2 * time.Minute
)

// FlowLimits bound the sign-ins in progress, which anyone may start (GET the dashboard's sign-in,
// auth/startLogin, auth/startDeviceLogin): each start records a flow, so these bound what
// anonymous callers can make the database hold, and keep one client address from filling a
// method's cap for everyone.
type FlowLimits struct {
	// PerAddress bounds the unfinished flows one client address (an IPv6 client per /64) has
	// started, over every method (config auth.flows.perAddress).
	PerAddress int
	// PerMethod bounds the unfinished flows of one method (config auth.flows.perMethod).
	PerMethod int
	// CountedFor is how long an unfinished flow counts against both caps (config
	// auth.flows.countedFor); it stays usable until it expires (flowTTL) after that, so a user
	// slow at the provider's login page still signs in, but anonymous starts fill no cap for
	// longer than this.
	CountedFor time.Duration
}

func (l FlowLimits) withDefaults() FlowLimits {
	if l.PerAddress <= 0 {
		l.PerAddress = DefaultFlowsPerAddress
	}
	if l.PerMethod <= 0 {
		l.PerMethod = DefaultFlowsPerMethod
	}
	if l.CountedFor <= 0 {
		l.CountedFor = DefaultFlowsCountedFor
	}
	return l
}

// clientOf is the client address key of the call or browser request in ctx (the guard puts it
// there, by the trusted-proxy rules); "unknown" outside the guard.
func clientOf(ctx context.Context) string {
	if c, ok := guard.CallFrom(ctx); ok && c.Client != "" {
		return c.Client
	}
	return ratelimit.AddressKey(netip.Addr{})
}

// startFlow records a code or device flow in progress, unless its client address or its method
// has too many unfinished flows (counted for FlowLimits.CountedFor): the locks, the count and the
// insert are one transaction, so concurrent starts never overshoot either cap. A refusal is
// ResourceExhausted with Retry-After and the cap's key.
func (s *Service) startFlow(ctx context.Context, m *method, kind, state, redirectURI, nonce, secret, returnTo string, expires time.Time) error {
	h := hashState(state)
	client := clientOf(ctx)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.LockAuthFlowStarts(ctx, db.LockAuthFlowStartsParams{Client: client, AuthMethodID: m.row.ID}); err != nil {
			return fmt.Errorf("lock the sign-in starts: %w", err)
		}
		open, err := q.CountOpenAuthFlows(ctx, db.CountOpenAuthFlowsParams{
			AuthMethodID: m.row.ID, Client: client, CountedSecs: s.flows.CountedFor.Seconds(),
		})
		if err != nil {
			return fmt.Errorf("count the sign-ins in progress: %w", err)
		}
		switch {
		case open.ClientOpen >= int64(s.flows.PerAddress):
			return s.flowsRefusal("this client address has %d sign-ins in progress (auth.flows.perAddress)", open.ClientOpen)
		case open.MethodOpen >= int64(s.flows.PerMethod):
			return s.flowsRefusal("auth method %q has %d sign-ins in progress (auth.flows.perMethod)", m.row.Name, open.MethodOpen)
		}
		return q.CreateAuthFlow(ctx, db.CreateAuthFlowParams{
			StateHash: h, AuthMethodID: m.row.ID, Kind: kind, RedirectUri: redirectURI, Nonce: nonce,
			SecretSealed: s.sealer.Seal([]byte(secret), flowAAD(h)), ReturnTo: returnTo, ExpiresAt: expires,
			Client: client,
		})
	})
	if _, ok := errors.AsType[*connect.Error](err); ok {
		return err
	}
	if err != nil {
		return fmt.Errorf("record the sign-in flow: %w", err)
	}
	return nil
}

// flowsRefusal is a start over a flow cap: ResourceExhausted with Retry-After, the longest a
// counted flow still counts.
func (s *Service) flowsRefusal(format string, args ...any) error {
	secs := ratelimit.RetryAfterSeconds(s.flows.CountedFor)
	cerr := connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(format+": finish or abandon one, or retry in %ds", append(args, secs)...))
	cerr.Meta().Set(guard.RetryAfterHeader, strconv.Itoa(secs))
	return cerr
}
