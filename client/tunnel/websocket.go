package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/coder/websocket"
)

// WebSocketStream is a Stream over a WebSocket of the tunnel subprotocol: each binary message
// is one frame (its type byte, then its payload). It reads into one buffer of MaxPayload, and a
// longer message is a protocol error.
type WebSocketStream struct {
	conn   *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	rbuf   []byte
	wmu    sync.Mutex
	wbuf   []byte
}

// NewWebSocketStream returns a Stream over conn; ctx bounds every read and write.
func NewWebSocketStream(ctx context.Context, conn *websocket.Conn) *WebSocketStream {
	ctx, cancel := context.WithCancel(ctx)
	conn.SetReadLimit(1 + MaxPayload)
	return &WebSocketStream{conn: conn, ctx: ctx, cancel: cancel, rbuf: make([]byte, 1+MaxPayload), wbuf: make([]byte, 0, 1+MaxPayload)}
}

// ReadFrame reads the next message as a frame.
func (s *WebSocketStream) ReadFrame() (Frame, error) {
	typ, r, err := s.conn.Reader(s.ctx)
	if err != nil {
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			return Frame{}, io.EOF
		}
		if c := websocket.CloseStatus(err); c != -1 {
			return Frame{}, &AbortError{Code: Code(c), Reason: closeReason(err)}
		}
		return Frame{}, err
	}
	if typ != websocket.MessageBinary {
		return Frame{}, fmt.Errorf("%w: a text message", ErrProtocol)
	}
	n, err := io.ReadFull(r, s.rbuf)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	} else if err == nil {
		// The buffer is full: anything more is over the limit (the read limit reports it).
		if _, err = r.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			return Frame{}, fmt.Errorf("%w: a message over %d bytes", ErrProtocol, 1+MaxPayload)
		}
		err = nil
	}
	if err != nil {
		return Frame{}, err
	}
	return ParseMessage(s.rbuf[:n])
}

// WriteFrame sends a frame as one message.
func (s *WebSocketStream) WriteFrame(f Frame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.wbuf = AppendMessage(s.wbuf[:0], f)
	return s.conn.Write(s.ctx, websocket.MessageBinary, s.wbuf)
}

// CloseSend does nothing: a WebSocket has no half-close; the CloseWrite frame says it.
func (s *WebSocketStream) CloseSend() error { return nil }

// Close ends the WebSocket with a normal closure; CloseWith says why otherwise.
func (s *WebSocketStream) Close() error { return s.CloseWith(CodeNormal, "") }

// CloseWith ends the WebSocket with a close code and reason.
func (s *WebSocketStream) CloseWith(code Code, reason string) error {
	defer s.cancel()
	return s.conn.Close(websocket.StatusCode(code), fitReason(reason))
}

func closeReason(err error) string {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		return ce.Reason
	}
	return ""
}
