package tunnel

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// Relay joins two frame streams at a middle hop (the API between the client's WebSocket and the
// gateway, the gateway between the API and the daemon): it copies frames each way as they
// come, one frame buffered per direction, and passes half-closes and aborts on. A hop may end
// the tunnel itself with Abort (the lease ended, the idle timeout).
type Relay struct {
	a, b Stream
	// lost is the code an end that breaks (an error other than an Abort frame) is reported
	// with.
	lostA, lostB Code

	once   sync.Once
	code   Code
	reason string
	done   chan struct{}

	// Bytes carried each way, and the time of the last frame (Unix nanoseconds).
	AToB, BToA atomic.Int64
	last       atomic.Int64
}

// NewRelay relays between a and b; a stream that breaks is reported as lostA or lostB.
func NewRelay(a, b Stream, lostA, lostB Code) *Relay {
	r := &Relay{a: a, b: b, lostA: lostA, lostB: lostB, done: make(chan struct{})}
	r.last.Store(time.Now().UnixNano())
	return r
}

// Run relays until both directions closed (CodeNormal) or the tunnel was aborted, and returns
// the code and reason it ended with. Both streams are closed when it returns.
func (r *Relay) Run() (Code, string) {
	var wg sync.WaitGroup
	wg.Go(func() { r.pipe(r.a, r.b, r.lostA, &r.AToB) })
	wg.Go(func() { r.pipe(r.b, r.a, r.lostB, &r.BToA) })
	wg.Wait()
	r.end(CodeNormal, "")
	return r.code, r.reason
}

// Abort ends the tunnel now: both ends get an Abort frame with code and reason.
func (r *Relay) Abort(code Code, reason string) {
	r.end(code, reason)
}

// Done is closed once the tunnel ended.
func (r *Relay) Done() <-chan struct{} { return r.done }

// Idle is how long no frame went either way.
func (r *Relay) Idle() time.Duration { return time.Since(time.Unix(0, r.last.Load())) }

func (r *Relay) end(code Code, reason string) {
	r.once.Do(func() {
		r.code, r.reason = code, reason
		if code != CodeNormal {
			p := AbortPayload(code, reason)
			_ = r.a.WriteFrame(Frame{Type: Abort, Payload: p})
			_ = r.b.WriteFrame(Frame{Type: Abort, Payload: p})
		}
		closeWith(r.a, code, reason)
		closeWith(r.b, code, reason)
		close(r.done)
	})
}

func (r *Relay) pipe(from, to Stream, lost Code, n *atomic.Int64) {
	for {
		f, err := from.ReadFrame()
		if err != nil {
			var ae *AbortError
			switch {
			case errors.As(err, &ae):
				r.end(ae.Code, ae.Reason)
			case errors.Is(err, ErrProtocol):
				r.end(CodeProtocol, err.Error())
			case errors.Is(err, io.EOF):
				r.end(lost, "the stream ended without closing")
			default:
				r.end(lost, err.Error())
			}
			return
		}
		r.last.Store(time.Now().UnixNano())
		switch f.Type {
		case Data:
			n.Add(int64(len(f.Payload)))
			if err := to.WriteFrame(f); err != nil {
				r.end(lost, err.Error())
				return
			}
		case CloseWrite:
			if err := to.WriteFrame(f); err != nil {
				r.end(lost, err.Error())
				return
			}
			_ = to.CloseSend()
			return
		case Abort:
			code, reason := ParseAbort(f.Payload)
			r.end(code, reason)
			return
		}
	}
}

// closeWith closes s, with the code and reason where its transport carries them (a WebSocket's
// close frame).
func closeWith(s Stream, code Code, reason string) {
	if c, ok := s.(interface{ CloseWith(Code, string) error }); ok {
		_ = c.CloseWith(code, reason)
		return
	}
	_ = s.Close()
}
