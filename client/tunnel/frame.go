package tunnel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// FrameType says what a frame carries.
type FrameType byte

// The frame types.
const (
	// Data carries bytes of the stream.
	Data FrameType = 0
	// CloseWrite says its sender sends no more data; the other direction keeps flowing.
	CloseWrite FrameType = 1
	// Abort ends the tunnel at once, both directions, with a Code and a reason (AbortPayload).
	Abort FrameType = 2
)

// MaxPayload bounds a frame's payload; a longer one is a protocol error.
const MaxPayload = 64 << 10

// headerLen is the length of a frame's header on a byte stream: type, then length (uint32 big
// endian). On a WebSocket a binary message is one frame: the type byte, then the payload.
const headerLen = 5

// Frame is one unit of a tunnel's stream. Payload is valid until the next read.
type Frame struct {
	Type    FrameType
	Payload []byte
}

// ErrProtocol is a malformed frame.
var ErrProtocol = errors.New("tunnel: protocol error")

// FrameReader reads frames from a byte stream (an HTTP/2 body), with one buffer of MaxPayload.
type FrameReader struct {
	r   io.Reader
	buf []byte
}

// NewFrameReader reads frames from r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: r, buf: make([]byte, headerLen+MaxPayload)}
}

// Read returns the next frame; io.EOF at a clean end between frames.
func (fr *FrameReader) Read() (Frame, error) {
	if _, err := io.ReadFull(fr.r, fr.buf[:headerLen]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, fmt.Errorf("%w: stream ended inside a frame header", ErrProtocol)
		}
		return Frame{}, err
	}
	t, n := FrameType(fr.buf[0]), binary.BigEndian.Uint32(fr.buf[1:headerLen])
	if t > Abort || n > MaxPayload {
		return Frame{}, fmt.Errorf("%w: frame type %d, length %d", ErrProtocol, t, n)
	}
	p := fr.buf[headerLen : headerLen+int(n)]
	if _, err := io.ReadFull(fr.r, p); err != nil {
		// A stream that ends cleanly inside a frame broke the protocol; one whose transport
		// failed (a connection reset by a gateway that died) was lost, as between frames.
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return Frame{}, fmt.Errorf("%w: stream ended inside a frame", ErrProtocol)
		}
		return Frame{}, fmt.Errorf("tunnel: reading a frame: %w", err)
	}
	return Frame{Type: t, Payload: p}, nil
}

// AppendFrame appends f as it goes on a byte stream.
func AppendFrame(b []byte, f Frame) []byte {
	b = append(b, byte(f.Type))
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.Payload)))
	return append(b, f.Payload...)
}

// ParseMessage reads a WebSocket message as a frame.
func ParseMessage(msg []byte) (Frame, error) {
	if len(msg) == 0 || FrameType(msg[0]) > Abort || len(msg)-1 > MaxPayload {
		return Frame{}, fmt.Errorf("%w: WebSocket message of %d bytes", ErrProtocol, len(msg))
	}
	return Frame{Type: FrameType(msg[0]), Payload: msg[1:]}, nil
}

// AppendMessage appends f as a WebSocket message.
func AppendMessage(b []byte, f Frame) []byte {
	return append(append(b, byte(f.Type)), f.Payload...)
}

// AbortPayload is an Abort frame's payload: the code (uint16 big endian), then the reason in
// UTF-8, at most 123 bytes (what a WebSocket close frame can carry).
func AbortPayload(code Code, reason string) []byte {
	reason = fitReason(reason)
	return append(binary.BigEndian.AppendUint16(nil, uint16(code)), reason...)
}

// ParseAbort reads an Abort frame's payload.
func ParseAbort(p []byte) (Code, string) {
	if len(p) < 2 {
		return CodeProtocol, "abort frame without a code"
	}
	return Code(binary.BigEndian.Uint16(p)), string(p[2:])
}

// maxReason is the most a WebSocket close frame carries of its reason, in bytes.
const maxReason = 123

// fitReason is reason as a close frame or an Abort frame carries it: valid UTF-8 (as a
// WebSocket close reason must be), cut to maxReason bytes at a rune boundary.
func fitReason(reason string) string {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	return strings.ToValidUTF8(reason, "")
}
