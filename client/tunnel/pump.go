package tunnel

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// Stream is one end of a tunnel's frame stream: a WebSocket (WebSocketStream) or an HTTP/2
// stream (ByteStream).
type Stream interface {
	// ReadFrame returns the next frame; its payload is valid until the next call.
	ReadFrame() (Frame, error)
	// WriteFrame sends a frame without delay.
	WriteFrame(Frame) error
	// CloseSend ends the sending direction once the last frame (CloseWrite or Abort) is sent,
	// where the transport has one (an HTTP/2 request body); it may do nothing.
	CloseSend() error
	// Close tears the stream down at once, both directions.
	Close() error
}

// Conn is the local end of a tunnel: a TCP connection, or standard input and output.
type Conn interface {
	io.ReadWriteCloser
	// CloseWrite half-closes: the peer reads EOF, and reading goes on.
	CloseWrite() error
}

// AbortError is a tunnel ended by an Abort frame, or one to send.
type AbortError struct {
	Code   Code
	Reason string
}

func (e *AbortError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("tunnel aborted: %d (%s)", e.Code, e.Code.Describe())
	}
	return fmt.Sprintf("tunnel aborted: %d (%s): %s", e.Code, e.Code.Describe(), e.Reason)
}

// Pump joins a local connection to a frame stream until both directions are done: what conn
// reads goes out as Data frames, and its EOF as CloseWrite (then CloseSend); Data frames that
// arrive are written to conn, and CloseWrite half-closes it. It returns nil when both sides
// closed their directions, an *AbortError when the peer aborted, or the error that tore the
// tunnel down (after sending the peer an Abort frame where it could); either way conn and s are
// closed. Each direction holds one buffer of MaxPayload.
func Pump(conn Conn, s Stream) error {
	var (
		once  sync.Once
		first error
		wg    sync.WaitGroup
	)
	fail := func(err error) {
		once.Do(func() {
			first = err
			var ae *AbortError
			if !errors.As(err, &ae) {
				ae = &AbortError{Code: CodeReset, Reason: err.Error()}
				if errors.Is(err, ErrProtocol) {
					ae.Code = CodeProtocol
				}
			}
			// Tell the peer why, if the stream still works, but do not wait on a peer that
			// stopped reading (its window is full) for longer than abortWait; closing the
			// stream unblocks the write.
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				_ = s.WriteFrame(Frame{Type: Abort, Payload: AbortPayload(ae.Code, ae.Reason)})
			}()
			select {
			case <-wrote:
			case <-time.After(abortWait):
			}
			_ = s.Close()
			_ = conn.Close()
			<-wrote
		})
	}
	wg.Go(func() { // conn → stream
		buf := make([]byte, MaxPayload)
		for {
			n, err := conn.Read(buf)
			if n > 0 {
				if werr := s.WriteFrame(Frame{Type: Data, Payload: buf[:n]}); werr != nil {
					fail(werr)
					return
				}
			}
			if errors.Is(err, io.EOF) {
				if werr := s.WriteFrame(Frame{Type: CloseWrite}); werr != nil {
					fail(werr)
					return
				}
				if werr := s.CloseSend(); werr != nil {
					fail(werr)
				}
				return
			}
			if err != nil {
				fail(err)
				return
			}
		}
	})
	wg.Go(func() { // stream → conn
		for {
			f, err := s.ReadFrame()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = &AbortError{Code: CodeGatewayLost, Reason: "the stream ended without closing"}
				}
				fail(err)
				return
			}
			switch f.Type {
			case Data:
				if _, err := conn.Write(f.Payload); err != nil {
					fail(err)
					return
				}
			case CloseWrite:
				if err := conn.CloseWrite(); err != nil {
					fail(err)
				}
				return
			case Abort:
				code, reason := ParseAbort(f.Payload)
				fail(&AbortError{Code: code, Reason: reason})
				return
			}
		}
	})
	wg.Wait()
	if first != nil {
		return first
	}
	_ = conn.Close()
	return s.Close()
}

// ByteStream is a Stream over a byte stream in each direction: an HTTP/2 request or response
// body. flush pushes written bytes out (an http.Flusher's, or nil); closeSend ends the sending
// direction (closing a request body's pipe); closeAll tears the stream down.
type ByteStream struct {
	fr        *FrameReader
	w         io.Writer
	flush     func() error
	closeSend func() error
	closeAll  func() error
	wbuf      []byte
	mu        sync.Mutex // WriteFrame may be called from Pump's two directions (Abort)
}

// NewByteStream returns a ByteStream; flush and closeSend may be nil.
func NewByteStream(r io.Reader, w io.Writer, flush, closeSend, closeAll func() error) *ByteStream {
	return &ByteStream{
		fr: NewFrameReader(r), w: w, flush: flush, closeSend: closeSend, closeAll: closeAll,
		wbuf: make([]byte, 0, headerLen+MaxPayload),
	}
}

// ReadFrame reads the next frame.
func (b *ByteStream) ReadFrame() (Frame, error) { return b.fr.Read() }

// WriteFrame writes a frame and flushes it.
func (b *ByteStream) WriteFrame(f Frame) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.wbuf = AppendFrame(b.wbuf[:0], f)
	if _, err := b.w.Write(b.wbuf); err != nil {
		return err
	}
	if b.flush != nil {
		return b.flush()
	}
	return nil
}

// CloseSend ends the sending direction.
func (b *ByteStream) CloseSend() error {
	if b.closeSend == nil {
		return nil
	}
	return b.closeSend()
}

// Close tears the stream down.
func (b *ByteStream) Close() error {
	if b.closeAll == nil {
		return nil
	}
	return b.closeAll()
}

// abortWait bounds how long Pump waits for its Abort frame to be written, to a peer that stopped
// reading, before it closes the stream.
const abortWait = 2 * time.Second
