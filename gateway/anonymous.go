package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/internal/limit/bucket"
)

// Anyone can open connections to the gateway and send Joins. What that may cost is bounded
// here: a connection without a verified client certificate (anonymous) takes a slot per client
// address and one in total, each request on it a slot per address and one in total, and its
// requests must arrive whole within limits.gatewayJoinReadTimeout. Refusals are counted
// (bc_gateway_anonymous_refusals_total{reason}) and their log lines sampled.

// Reasons of bc_gateway_anonymous_refusals_total.
const (
	refusedAddressConns = "address_connections"
	refusedConns        = "connections"
	refusedAddressJoins = "address_joins"
	refusedJoins        = "joins"
	refusedJoinRate     = "join_rate"
	refusedReadTimeout  = "read_timeout"
	refusedCall         = "call"
)

// Log lines of anonymous refusals: at most anonymousLogLines an anonymousLogInterval.
const (
	anonymousLogLines    = 10
	anonymousLogInterval = time.Minute
)

// joinBuckets is how many client addresses the Join rate limiter remembers (the least recently
// used is forgotten, which only gives it a full bucket again).
const joinBuckets = 65_536

// admission holds the anonymous slots of a gateway.
type admission struct {
	l Limits

	mu           sync.Mutex
	conns        int            // anonymous connections (past their handshake)
	connsByAddr  map[string]int // the same by address key
	joins        int
	joinsByAddr  map[string]int
	joinAttempts *bucket.Limiter // refused joins, by address key

	log     *bucket.Sampler
	refused func(reason string)
}

func newAdmission(l Limits, refused func(string)) *admission {
	return &admission{
		l: l, connsByAddr: map[string]int{}, joinsByAddr: map[string]int{},
		joinAttempts: bucket.New(bucket.Limit{Rate: l.JoinRate, Burst: l.JoinBurst}, joinBuckets),
		log:          bucket.NewSampler(anonymousLogLines, anonymousLogInterval),
		refused:      refused,
	}
}

// take takes a slot of a count by address and, when total is not nil, of the total; key ""
// (an address the gateway cannot tell, as behind a proxy) takes only the total. It says which
// cap refused, or "" when the slot is taken.
func (a *admission) take(byAddr map[string]int, perAddr int, total *int, most int, key, addrReason, totalReason string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if key != "" && byAddr[key] >= perAddr {
		return addrReason
	}
	if total != nil {
		if *total >= most {
			return totalReason
		}
		*total++
	}
	if key != "" {
		byAddr[key]++
	}
	return ""
}

// give gives back what take took.
func (a *admission) give(byAddr map[string]int, total *int, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if total != nil {
		*total--
	}
	if key != "" {
		if byAddr[key]--; byAddr[key] <= 0 {
			delete(byAddr, key)
		}
	}
}

// anonymousConns is how many connections without a certificate are open (past the handshake).
func (a *admission) anonymousConns() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns
}

// refuse counts a refusal and logs it, sampled.
func (g *Gateway) refuse(ctx context.Context, reason, key string, attrs ...slog.Attr) {
	g.admission.refused(reason)
	if ok, suppressed := g.admission.log.Take(); ok {
		g.log.LogAttrs(ctx, slog.LevelInfo, "anonymous daemon traffic refused", append(attrs,
			slog.String("reason", reason), slog.String("client", key), slog.Int("suppressed_since_last", suppressed))...)
	}
}

// addressKey is the rate-limiting key of a connection's peer (bucket.AddressKey: IPv6 per /64).
func addressKey(a net.Addr) string {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return bucket.AddressKey(netip.Addr{})
	}
	return bucket.AddressKey(ap.Addr().Unmap())
}

// anonConn is a connection the gateway accepted, which holds a slot of its client address and
// one of the total from when its handshake showed no certificate until it is closed.
type anonConn struct {
	net.Conn
	key  string
	held atomic.Bool
	a    *admission
}

// NetConn is the connection underneath, so that wsnet.Over sees through it.
func (c *anonConn) NetConn() net.Conn { return c.Conn }

// Close closes the connection and gives back its slots.
func (c *anonConn) Close() error {
	if c.held.Swap(false) {
		c.a.give(c.a.connsByAddr, &c.a.conns, c.key)
	}
	return c.Conn.Close()
}

// keyOf finds the anonConn under c (a *tls.Conn's) and returns its address key.
func keyOf(c net.Conn) (string, bool) {
	for c != nil {
		if ac, ok := c.(*anonConn); ok {
			return ac.key, true
		}
		inner, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = inner.NetConn()
	}
	return "", false
}

// clientKey holds the client's address key in a connection's requests' contexts.
type clientKey struct{}

// clientOf is the address key of the client a request came from ("" when unknown).
func clientOf(ctx context.Context) string {
	k, _ := ctx.Value(clientKey{}).(string)
	return k
}

// anonymousRequests wraps the handler of the connections without a certificate: each request
// takes a slot of its address and of the total, or is refused with resource_exhausted before
// its body is read, and must arrive whole within JoinReadTimeout.
func (g *Gateway) anonymousRequests(next http.Handler) http.Handler {
	a := g.admission
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := clientOf(r.Context())
		if reason := a.take(a.joinsByAddr, a.l.JoinsInFlightPerAddress, &a.joins, a.l.JoinsInFlight, key, refusedAddressJoins, refusedJoins); reason != "" {
			g.refuse(r.Context(), reason, key, slog.String("path", r.URL.Path))
			writeRefusal(w, r, connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
				"too many requests without a client certificate in flight (limits.gatewayJoinsInFlight%s)", map[bool]string{true: "PerAddress"}[reason == refusedAddressJoins])))
			return
		}
		defer a.give(a.joinsByAddr, &a.joins, key)
		deadline := time.Now().Add(a.l.JoinReadTimeout)
		if err := http.NewResponseController(w).SetReadDeadline(deadline); err != nil {
			g.log.WarnContext(r.Context(), "cannot bound a Join's read", "err", err)
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &deadlineBody{ReadCloser: r.Body, timedOut: func() {
				g.refuse(r.Context(), refusedReadTimeout, key, slog.String("path", r.URL.Path))
			}}
		}
		next.ServeHTTP(w, r)
	})
}

// writeRefusal answers a request with a Connect error, whatever protocol it speaks.
func writeRefusal(w http.ResponseWriter, r *http.Request, err *connect.Error) {
	ew := connect.NewErrorWriter()
	if ew.IsSupported(r) {
		_ = ew.Write(w, r, err)
		return
	}
	http.Error(w, err.Message(), http.StatusTooManyRequests)
}

// deadlineBody turns the read deadline's error into a Connect deadline_exceeded naming the
// limit, and reports it once.
type deadlineBody struct {
	io.ReadCloser
	once     sync.Once
	timedOut func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		b.once.Do(b.timedOut)
		return n, connect.NewError(connect.CodeDeadlineExceeded,
			errors.New("the request did not arrive within limits.gatewayJoinReadTimeout"))
	}
	return n, err // the body's own error (io.EOF among them), unwrapped as io.Reader promises
}

// countRefusal counts one refusal of anonymous traffic, in the metric and for AnonymousRefusals.
func (g *Gateway) countRefusal(reason string) {
	n, _ := g.refusals.LoadOrStore(reason, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	g.metrics.RefuseAnonymous(reason)
}

// AnonymousRefusals is how many times anonymous traffic was refused for reason since the
// gateway started (bc_gateway_anonymous_refusals_total{reason} counts the same).
func (g *Gateway) AnonymousRefusals(reason string) int64 {
	if n, ok := g.refusals.Load(reason); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

// AnonymousConns is how many connections without a client certificate the gateway holds.
func (g *Gateway) AnonymousConns() int { return g.admission.anonymousConns() }
