package daemon

import (
	"context"
	"net"
	"time"

	"github.com/better-compute/better-compute/internal/fleet"
)

// via is the transport of the agent's connections: TransportAuto's current choice, or the
// one it was told to use.
func (a *Agent) via() fleet.Transport {
	switch a.opts.Dialer.Transport {
	case TransportWebSocket:
		return fleet.TransportWebSocket
	case TransportAuto:
		t, _ := a.opts.Dialer.Choice.Current()
		return t
	default:
		return fleet.TransportH2
	}
}

// retryDirect is TransportAuto's way back: while the session runs over the WebSocket it tries
// the direct path when the fallback is due to end (and every RetryDirect after), and when the
// direct path works it ends the session (end), so the next one is direct. A failed attempt
// extends the fallback.
func (a *Agent) retryDirect(ctx context.Context, end context.CancelFunc) {
	choice := a.opts.Dialer.Choice
	for {
		at := choice.retryAt()
		if at.IsZero() {
			return
		}
		t := time.NewTimer(time.Until(at))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := a.probeDirect(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			a.log.Info("the direct path to the gateway still fails; staying on the WebSocket", "err", err)
			choice.fellBack(time.Now(), err)
			continue
		}
		a.log.Info("the direct path to the gateway works again; reconnecting over it")
		choice.direct()
		// New transports, as a renewal makes: the connections inside the WebSocket would
		// otherwise carry the next session too.
		a.mu.Lock()
		id := a.identity
		a.mu.Unlock()
		if err := a.setIdentity(id); err != nil {
			a.log.Warn("reconnect directly", "err", err)
			return
		}
		end()
		return
	}
}

// probeDirect makes one direct handshake with the gateway, as the node, and closes it.
func (a *Agent) probeDirect(ctx context.Context) error {
	a.mu.Lock()
	id := a.identity
	a.mu.Unlock()
	cert, err := id.Certificate()
	if err != nil {
		return err
	}
	d := a.opts.Dialer
	dial := d.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	cfg := d.tlsConfig(id.RootPEM, &cert, id.TrustDomain, nil)
	ctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	c, err := handshake(ctx, cfg, d.Gateway, func(ctx context.Context) (net.Conn, error) { return dial(ctx, "tcp", d.Gateway) })
	if err != nil {
		return err
	}
	return c.Close()
}
