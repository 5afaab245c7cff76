package config

import (
	"time"

	"github.com/better-compute/better-compute/internal/limit"
)

// Limits bound what one request, connection or daemon message may cost a process, so that no
// caller (an anonymous one included) can make it read, inflate or hold more than this. Every
// key has a default that suits a deployment of any size.
type Limits struct {
	// RequestBytes is the largest API request message, after decompression; a larger one is
	// refused with resource_exhausted before any handler runs. Default 4194304 (4 MiB).
	RequestBytes int `yaml:"requestBytes"`
	// HeaderBytes bounds the request headers of the API and the gateway. Default 65536.
	HeaderBytes int `yaml:"headerBytes"`
	// ReadHeaderTimeout bounds reading a request's headers, on every listener. Default 10s.
	ReadHeaderTimeout time.Duration `yaml:"readHeaderTimeout"`
	// ReadTimeout bounds reading a whole API request, body included. The gateway has none: it
	// would cut the daemons' long-lived sessions. Default 1m.
	ReadTimeout time.Duration `yaml:"readTimeout"`
	// IdleTimeout closes keep-alive connections idle this long, API and gateway. Default 2m.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// DaemonRequestBytes is the largest Join, Renew or Secret request the gateway reads
	// (Join needs no client certificate). Default 65536.
	DaemonRequestBytes int `yaml:"daemonRequestBytes"`
	// DaemonHelloBytes is the largest session hello, inventory included. Default 1048576.
	DaemonHelloBytes int `yaml:"daemonHelloBytes"`
	// DaemonResultBytes is the largest command result a session carries. Default 4194304.
	DaemonResultBytes int `yaml:"daemonResultBytes"`
	// DaemonEventBytes is the largest event, heartbeat or ack a session carries. Default 65536.
	DaemonEventBytes int `yaml:"daemonEventBytes"`
	// GatewaySessions is the most sessions one gateway process holds; a node past it is refused
	// (resource_exhausted) and reconnects later, to this gateway or another. It also sizes the
	// gateway's default memory limit (GOMEMLIMIT). Default 20000.
	GatewaySessions int `yaml:"gatewaySessions"`
	// GatewayAnonymousConns is the most connections without a verified client certificate
	// (that can only Join) one gateway holds; one past it is closed after its handshake.
	// Default 512.
	GatewayAnonymousConns int `yaml:"gatewayAnonymousConns"`
	// GatewayAnonymousConnsPerAddress is the same per client address (IPv6 per /64). Default 64.
	GatewayAnonymousConnsPerAddress int `yaml:"gatewayAnonymousConnsPerAddress"`
	// GatewayJoinsInFlight is the most requests being served on those connections at once; one
	// past it is refused with resource_exhausted before its body is read. Default 128.
	GatewayJoinsInFlight int `yaml:"gatewayJoinsInFlight"`
	// GatewayJoinsInFlightPerAddress is the same per client address. Default 32.
	GatewayJoinsInFlightPerAddress int `yaml:"gatewayJoinsInFlightPerAddress"`
	// GatewayJoinStreams is the most concurrent HTTP/2 streams on a connection without a
	// certificate. Default 4.
	GatewayJoinStreams int `yaml:"gatewayJoinStreams"`
	// GatewayJoinWindowBytes is the HTTP/2 receive window, per stream and per connection, of a
	// connection without a certificate (certificate-bearing ones keep the tunnels' 4 MiB and
	// 64 MiB). Default 65536.
	GatewayJoinWindowBytes int `yaml:"gatewayJoinWindowBytes"`
	// GatewayJoinReadTimeout bounds the reading of a whole request on a connection without a
	// certificate. Default 10s.
	GatewayJoinReadTimeout time.Duration `yaml:"gatewayJoinReadTimeout"`
	// GatewayJoinRate and GatewayJoinBurst shape each client address's bucket of refused joins:
	// a Join takes a token before its join token is looked up and gives it back when it
	// succeeds; an empty bucket refuses with resource_exhausted. Defaults 5 a second, 50.
	GatewayJoinRate  float64 `yaml:"gatewayJoinRate"`
	GatewayJoinBurst int     `yaml:"gatewayJoinBurst"`
}

// defaultLimits are the limits when neither the file nor the environment sets them.
func defaultLimits() Limits {
	return Limits{
		RequestBytes:       limit.DefaultRequestBytes,
		HeaderBytes:        limit.DefaultHeaderBytes,
		ReadHeaderTimeout:  limit.DefaultReadHeaderTimeout,
		ReadTimeout:        limit.DefaultReadTimeout,
		IdleTimeout:        limit.DefaultIdleTimeout,
		DaemonRequestBytes: limit.DefaultDaemonRequestBytes,
		DaemonHelloBytes:   limit.DefaultDaemonHelloBytes,
		DaemonResultBytes:  limit.DefaultDaemonResultBytes,
		DaemonEventBytes:   limit.DefaultDaemonEventBytes,
		GatewaySessions:    limit.DefaultGatewaySessions,

		GatewayAnonymousConns:           limit.DefaultGatewayAnonymousConns,
		GatewayAnonymousConnsPerAddress: limit.DefaultGatewayAnonymousConnsPerAddress,
		GatewayJoinsInFlight:            limit.DefaultGatewayJoinsInFlight,
		GatewayJoinsInFlightPerAddress:  limit.DefaultGatewayJoinsInFlightPerAddress,
		GatewayJoinStreams:              limit.DefaultGatewayJoinStreams,
		GatewayJoinWindowBytes:          limit.DefaultGatewayJoinWindowBytes,
		GatewayJoinReadTimeout:          limit.DefaultGatewayJoinReadTimeout,
		GatewayJoinRate:                 limit.DefaultGatewayJoinRate,
		GatewayJoinBurst:                limit.DefaultGatewayJoinBurst,
	}
}

// Bounds of the limits themselves: below the lower ones ordinary requests fail, above the upper
// ones a limit no longer protects anything.
const (
	minLimitBytes  = 1 << 10
	maxLimitBytes  = 256 << 20
	minHeaderBytes = 4 << 10
	maxHeaderBytes = 16 << 20
	maxLimitTime   = time.Hour
	// maxGatewaySessions is far past what one process can hold (about 100 KiB each).
	maxGatewaySessions = 1_000_000
)

func (c *Config) checkLimits(ps *problems) {
	l := c.Limits
	for _, b := range []struct {
		key      string
		v        int
		min, max int
	}{
		{"limits.requestBytes", l.RequestBytes, minLimitBytes, maxLimitBytes},
		{"limits.headerBytes", l.HeaderBytes, minHeaderBytes, maxHeaderBytes},
		{"limits.daemonRequestBytes", l.DaemonRequestBytes, minLimitBytes, maxLimitBytes},
		{"limits.daemonHelloBytes", l.DaemonHelloBytes, minLimitBytes, maxLimitBytes},
		{"limits.daemonResultBytes", l.DaemonResultBytes, minLimitBytes, maxLimitBytes},
		{"limits.daemonEventBytes", l.DaemonEventBytes, minLimitBytes, maxLimitBytes},
	} {
		if b.v < b.min || b.v > b.max {
			ps.add(b.key, "must be from %d to %d bytes, got %d", b.min, b.max, b.v)
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{
		{"limits.readHeaderTimeout", l.ReadHeaderTimeout},
		{"limits.readTimeout", l.ReadTimeout},
		{"limits.idleTimeout", l.IdleTimeout},
		{"limits.gatewayJoinReadTimeout", l.GatewayJoinReadTimeout},
	} {
		if d.v <= 0 || d.v > maxLimitTime {
			ps.add(d.key, "must be a positive duration of at most %s, got %s", maxLimitTime, d.v)
		}
	}
	if l.GatewaySessions < 1 || l.GatewaySessions > maxGatewaySessions {
		ps.add("limits.gatewaySessions", "must be from 1 to %d, got %d", maxGatewaySessions, l.GatewaySessions)
	}
	for _, n := range []struct {
		key      string
		v        int
		min, max int
	}{
		{"limits.gatewayAnonymousConns", l.GatewayAnonymousConns, 1, maxGatewaySessions},
		{"limits.gatewayAnonymousConnsPerAddress", l.GatewayAnonymousConnsPerAddress, 1, maxGatewaySessions},
		{"limits.gatewayJoinsInFlight", l.GatewayJoinsInFlight, 1, maxGatewaySessions},
		{"limits.gatewayJoinsInFlightPerAddress", l.GatewayJoinsInFlightPerAddress, 1, maxGatewaySessions},
		{"limits.gatewayJoinStreams", l.GatewayJoinStreams, 1, 1000},
		// HTTP/2 windows start at 65535 bytes; a smaller one cannot be announced.
		{"limits.gatewayJoinWindowBytes", l.GatewayJoinWindowBytes, 65535, 16 << 20},
		{"limits.gatewayJoinBurst", l.GatewayJoinBurst, 1, maxGatewaySessions},
	} {
		if n.v < n.min || n.v > n.max {
			ps.add(n.key, "must be from %d to %d, got %d", n.min, n.max, n.v)
		}
	}
	if !(l.GatewayJoinRate > 0) {
		ps.add("limits.gatewayJoinRate", "must be a positive number of joins a second, got %v", l.GatewayJoinRate)
	}
	if l.ReadTimeout > 0 && l.ReadTimeout < l.ReadHeaderTimeout {
		ps.add("limits.readTimeout", "must be at least limits.readHeaderTimeout (%s), got %s", l.ReadHeaderTimeout, l.ReadTimeout)
	}
}
