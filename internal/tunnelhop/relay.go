package tunnelhop

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/better-compute/better-compute/client/tunnel"
)

// Relay joins two frame streams at a middle hop (the API between the client's WebSocket and the
// gateway, the gateway between the API and the daemon): it copies frames each way as they
// come, one frame buffered per direction, and passes half-closes and aborts on. A hop may end
// the tunnel itself with Abort (the lease ended, the idle timeout).
type Relay struct {
	a, b tunnel.Stream
	// lost is the code an end that breaks (an error other than an Abort frame) is reported
	// with.
	lostA, lostB tunnel.Code

	once   sync.Once
	code   tunnel.Code
	reason string
	done   chan struct{}

	// Bytes carried each way, and the time of the last frame (Unix nanoseconds).
	AToB, BToA atomic.Int64
	last       atomic.Int64
}

// abortWait bounds how long an abort waits for its Abort frames to be written before it closes
// the streams.
const abortWait = 2 * time.Second

// NewRelay relays between a and b; a stream that breaks is reported as lostA or lostB.
func NewRelay(a, b tunnel.Stream, lostA, lostB tunnel.Code) *Relay {
	r := &Relay{a: a, b: b, lostA: lostA, lostB: lostB, done: make(chan struct{})}
	r.last.Store(time.Now().UnixNano())
	return r
}

// Run relays until both directions closed (CodeNormal) or the tunnel was aborted, and returns
// the code and reason it ended with. Both streams are closed when it returns.
func (r *Relay) Run() (tunnel.Code, string) {
	var wg sync.WaitGroup
	wg.Go(func() { r.pipe(r.a, r.b, r.lostA, r.lostB, &r.AToB) })
	wg.Go(func() { r.pipe(r.b, r.a, r.lostB, r.lostA, &r.BToA) })
	wg.Wait()
	r.end(tunnel.CodeNormal, "")
	return r.code, r.reason
}

// Abort ends the tunnel now: both ends get an Abort frame with code and reason.
func (r *Relay) Abort(code tunnel.Code, reason string) {
	r.end(code, reason)
}

// Done is closed once the tunnel ended.
func (r *Relay) Done() <-chan struct{} { return r.done }

// Idle is how long no frame went either way.
func (r *Relay) Idle() time.Duration { return time.Since(time.Unix(0, r.last.Load())) }

func (r *Relay) end(code tunnel.Code, reason string) {
	r.once.Do(func() {
		r.code, r.reason = code, reason
		if code == tunnel.CodeNormal {
			closeWith(r.a, code, reason)
			closeWith(r.b, code, reason)
			close(r.done)
			return
		}
		// Tell both ends why, each on its own: an end that stopped reading holds its stream's
		// writer on flow control, and must not keep the other end from hearing. After
		// abortWait the streams are closed, which unblocks what still waits; the writes are
		// waited for either way, so none outlives the relay (an HTTP handler's writer must
		// not be used once it returns).
		p := tunnel.AbortPayload(code, reason)
		var wg sync.WaitGroup
		for _, s := range []tunnel.Stream{r.a, r.b} {
			wg.Go(func() { _ = s.WriteFrame(tunnel.Frame{Type: tunnel.Abort, Payload: p}) })
		}
		waited := make(chan struct{})
		go func() { wg.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(abortWait):
		}
		closeWith(r.a, code, reason)
		closeWith(r.b, code, reason)
		<-waited
		close(r.done)
	})
}

// pipe copies frames from one stream to the other; a stream that breaks ends the tunnel with
// its lost code: lostFrom when reading fails, lostTo when writing does.
func (r *Relay) pipe(from, to tunnel.Stream, lostFrom, lostTo tunnel.Code, n *atomic.Int64) {
	for {
		f, err := from.ReadFrame()
		if err != nil {
			var ae *tunnel.AbortError
			switch {
			case errors.As(err, &ae):
				r.end(ae.Code, ae.Reason)
			case errors.Is(err, tunnel.ErrProtocol):
				r.end(tunnel.CodeProtocol, err.Error())
			case errors.Is(err, io.EOF):
				r.end(lostFrom, "the stream ended without closing")
			default:
				r.end(lostFrom, err.Error())
			}
			return
		}
		r.last.Store(time.Now().UnixNano())
		switch f.Type {
		case tunnel.Data:
			n.Add(int64(len(f.Payload)))
			if err := to.WriteFrame(f); err != nil {
				r.end(lostTo, err.Error())
				return
			}
		case tunnel.CloseWrite:
			if err := to.WriteFrame(f); err != nil {
				r.end(lostTo, err.Error())
				return
			}
			_ = to.CloseSend()
			return
		case tunnel.Abort:
			code, reason := tunnel.ParseAbort(f.Payload)
			r.end(code, reason)
			return
		}
	}
}

// closeWith closes s, with the code and reason where its transport carries them (a WebSocket's
// close frame).
func closeWith(s tunnel.Stream, code tunnel.Code, reason string) {
	if c, ok := s.(interface {
		CloseWith(tunnel.Code, string) error
	}); ok {
		_ = c.CloseWith(code, reason)
		return
	}
	_ = s.Close()
}
