package events

import (
	"context"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Connection timing. A dial gives up after dialTimeout; a lost connection is retried without end,
// the wait doubling from minReconnect to maxReconnect with jitter; pings notice a server that
// vanished without closing the connection within about three pingIntervals.
const (
	dialTimeout  = 5 * time.Second
	minReconnect = 100 * time.Millisecond
	maxReconnect = 5 * time.Second
	pingInterval = 5 * time.Second
	clientName   = "better-compute events"
)

// urlList is the configured URLs as nats.Connect takes them.
func (c *Config) urlList() string {
	parts := strings.Split(c.URL, ",")
	out := parts[:0]
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ",")
}

// options are the client options of the configuration: TLS, credentials, and, when retry, a
// connection that keeps reconnecting without end (also when the first connect fails) and fails
// a publish at once while it is disconnected, so the dispatcher retries it later instead of the
// client buffering it. Without retry a connection fails at once, for a check.
func (c *Config) options(log *slog.Logger, retry bool) ([]nats.Option, error) {
	opts := []nats.Option{nats.Name(clientName), nats.Timeout(dialTimeout), nats.PingInterval(pingInterval), nats.MaxPingsOutstanding(2)}
	tlsCfg, err := c.TLS.config()
	if err != nil {
		return nil, fmt.Errorf("nats tls: %w", err)
	}
	if tlsCfg != nil {
		opts = append(opts, nats.Secure(tlsCfg))
	}
	cr := c.Credentials
	switch {
	case cr.Token != "":
		opts = append(opts, nats.Token(cr.Token))
	case cr.User != "":
		opts = append(opts, nats.UserInfo(cr.User, cr.Password))
	case cr.NkeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(cr.NkeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats credentials.nkeySeedFile: %w", err)
		}
		opts = append(opts, o)
	case cr.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cr.CredsFile))
	}
	if !retry {
		return append(opts, nats.NoReconnect()), nil
	}
	servers := strings.Join(c.Servers(), ",")
	return append(opts,
		nats.RetryOnFailedConnect(true),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Warn("disconnected from NATS; reconnecting", "servers", servers, "err", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", "server", redactedURL(nc.ConnectedUrlRedacted()))
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			log.Debug("reconnect to NATS failed", "servers", servers, "err", err)
		}),
	), nil
}

// reconnectDelay is the wait before the attempts-th pass over the servers.
func reconnectDelay(attempts int) time.Duration {
	d := minReconnect
	for i := 1; i < attempts && d < maxReconnect; i++ {
		d *= 2
	}
	d = min(d, maxReconnect)
	return d/2 + mrand.N(d/2+1)
}

// redactedURL drops what nats.go's redaction leaves of the user part.
func redactedURL(u string) string {
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + u[i+1:]
		}
	}
	return u
}

// dial connects once, within ctx and dialTimeout, without reconnecting: a check's connection.
func (c *Config) dial(ctx context.Context) (*nats.Conn, error) {
	opts, err := c.options(nil, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	type result struct {
		nc  *nats.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		nc, err := nats.Connect(c.urlList(), opts...)
		done <- result{nc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("connect to %s: %w", strings.Join(c.Servers(), ","), r.err)
		}
		return r.nc, nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.nc != nil {
				r.nc.Close()
			}
		}()
		return nil, fmt.Errorf("connect to %s: no connection within %s", strings.Join(c.Servers(), ","), dialTimeout)
	}
}
