// Package limit bounds what one request can cost a server before any handler sees it: the
// largest request message (after decompression, so a gzip bomb is refused after reading at most
// the limit), the bytes read from a request body, and the defaults of the configuration keys
// under limits (config.Limits). The API and the gateway use the same mechanism, so a bound
// proven for one holds for the other.
package limit

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"time"

	"connectrpc.com/connect"
)

// Defaults of the limits.* configuration keys, also used by servers whose options leave a limit
// at zero, so that nothing runs unbounded.
const (
	// DefaultRequestBytes bounds one API request message, decompressed (limits.requestBytes).
	DefaultRequestBytes = 4 << 20
	// DefaultHeaderBytes bounds a request's headers, API and gateway (limits.headerBytes).
	DefaultHeaderBytes = 64 << 10
	// DefaultReadHeaderTimeout bounds reading a request's headers (limits.readHeaderTimeout).
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole API request, body included (limits.readTimeout).
	DefaultReadTimeout = time.Minute
	// DefaultIdleTimeout closes keep-alive connections idle this long (limits.idleTimeout).
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultDaemonRequestBytes bounds the gateway's Join, Renew and Secret requests
	// (limits.daemonRequestBytes): a token, a CSR and a host name are a few kilobytes.
	DefaultDaemonRequestBytes = 64 << 10
	// DefaultDaemonHelloBytes bounds a session's hello, inventory included (limits.daemonHelloBytes).
	DefaultDaemonHelloBytes = 1 << 20
	// DefaultDaemonResultBytes bounds one command result on a session (limits.daemonResultBytes).
	DefaultDaemonResultBytes = 4 << 20
	// DefaultDaemonEventBytes bounds one event, heartbeat or ack on a session
	// (limits.daemonEventBytes).
	DefaultDaemonEventBytes = 64 << 10
	// DefaultGatewaySessions bounds the sessions one gateway holds (limits.gatewaySessions): a
	// 10,000-node fleet fits one gateway twice over.
	DefaultGatewaySessions = 20_000
	// DefaultGatewayAnonymousConns bounds the gateway's connections without a verified client
	// certificate, in total (limits.gatewayAnonymousConns) and per client address
	// (limits.gatewayAnonymousConnsPerAddress; IPv6 per /64). Such a connection can do one thing,
	// Join, which a node does once.
	DefaultGatewayAnonymousConns           = 512
	DefaultGatewayAnonymousConnsPerAddress = 64
	// DefaultGatewayJoinsInFlight bounds the requests being read or answered on those connections,
	// in total (limits.gatewayJoinsInFlight) and per client address
	// (limits.gatewayJoinsInFlightPerAddress): each holds up to a Join's message in memory.
	DefaultGatewayJoinsInFlight           = 128
	DefaultGatewayJoinsInFlightPerAddress = 32
	// DefaultGatewayJoinStreams is the most concurrent HTTP/2 streams on a connection without a
	// certificate (limits.gatewayJoinStreams).
	DefaultGatewayJoinStreams = 4
	// DefaultGatewayJoinWindowBytes is the HTTP/2 receive window, per stream and per connection,
	// of a connection without a certificate (limits.gatewayJoinWindowBytes): HTTP/2's initial 64 KiB.
	DefaultGatewayJoinWindowBytes = 64 << 10
	// DefaultGatewayJoinReadTimeout bounds the reading of a whole request on a connection without
	// a certificate (limits.gatewayJoinReadTimeout).
	DefaultGatewayJoinReadTimeout = 10 * time.Second
	// DefaultGatewayJoinRate and DefaultGatewayJoinBurst shape the per-address token bucket of
	// refused joins (limits.gatewayJoinRate, limits.gatewayJoinBurst): a join takes a token before
	// its token is looked up, and a successful one gives it back.
	DefaultGatewayJoinRate  = 5.0
	DefaultGatewayJoinBurst = 50
)

// Or returns v, or def when v is zero or negative: how servers apply a limit their options may
// leave unset.
func Or[T int | int64 | float64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// HandlerOptions bound every request message of a Connect handler to maxBytes: the message as
// sent, and again after decompression. Connect's own gzip decompressor, past the limit, inflates
// the rest of the message only to count it (a second of CPU for a 1 MB body that inflates to
// 1 GiB); the one installed here stops at the first byte past the limit instead.
func HandlerOptions(maxBytes int) []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithReadMaxBytes(maxBytes),
		connect.WithCompression("gzip", nil, nil), // drop the default, or the name is listed twice
		connect.WithCompression("gzip",
			func() connect.Decompressor { return &boundedGzip{max: int64(maxBytes) + 1} },
			func() connect.Compressor { return gzip.NewWriter(io.Discard) }),
	}
}

// Body bounds the request bodies h reads to what a message of maxBytes can take on the wire
// (with its framing and compression overhead), so an oversized body is refused at once instead
// of being read to its end. Only for handlers of unary calls: a stream's body is as long as the
// stream lives.
func Body(maxBytes int, h http.Handler) http.Handler {
	wire := WireBytes(maxBytes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, wire)
		}
		h.ServeHTTP(w, r)
	})
}

// WireBytes is the most body bytes that Body lets through for a message of maxBytes: an eighth
// more plus a kilobyte covers gRPC framing and gzip's worst case on incompressible data.
func WireBytes(maxBytes int) int64 {
	return int64(maxBytes) + int64(maxBytes)/8 + 1<<10
}

// ErrDecompressedTooLarge is what the bounded decompressor returns past its limit.
var ErrDecompressedTooLarge = errors.New("the decompressed message is larger than the limit")

// boundedGzip is a gzip reader that yields at most max bytes per message, then fails.
type boundedGzip struct {
	gz  gzip.Reader
	max int64
	n   int64
}

func (d *boundedGzip) Read(p []byte) (int, error) {
	if d.n >= d.max {
		return 0, ErrDecompressedTooLarge
	}
	if rest := d.max - d.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := d.gz.Read(p)
	d.n += int64(n)
	return n, err
}

// Reset starts a new message from r; Connect calls it before every use.
func (d *boundedGzip) Reset(r io.Reader) error {
	d.n = 0
	return d.gz.Reset(r)
}

// Close releases the gzip reader.
func (d *boundedGzip) Close() error { return d.gz.Close() }
