package tunneltest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/better-compute/better-compute/client/tunnel"
)

// ErrTorn is what the far end of a StreamPair end that was closed (torn down) reads.
var ErrTorn = errors.New("stream torn down")

// PipeEnd is one end of an in-memory frame stream, as an HTTP/2 stream's body pair: R reads what
// the other end writes, and W writes what it reads. Writes wait for the other end's reads.
type PipeEnd struct {
	R *io.PipeReader
	W *io.PipeWriter
}

// StreamPair returns the two ends of an in-memory frame stream, and their raw pipes for a test
// that writes bytes no frame writer would. CloseSend ends an end's sending direction (the other
// reads io.EOF), Close tears both directions down (the other reads ErrTorn).
func StreamPair() (a, b *tunnel.ByteStream, rawA, rawB PipeEnd) {
	ar, bw := io.Pipe()
	br, aw := io.Pipe()
	rawA, rawB = PipeEnd{ar, aw}, PipeEnd{br, bw}
	return rawA.stream(), rawB.stream(), rawA, rawB
}

func (p PipeEnd) stream() *tunnel.ByteStream {
	return tunnel.NewByteStream(p.R, p.W, nil, p.W.Close, func() error {
		_ = p.W.CloseWithError(ErrTorn)
		_ = p.R.CloseWithError(ErrTorn)
		return nil
	})
}

// MustWrite writes f to s, failing the test if it cannot.
func MustWrite(t testing.TB, s tunnel.Stream, f tunnel.Frame) {
	t.Helper()
	if err := s.WriteFrame(f); err != nil {
		t.Fatalf("write frame of type %d: %v", f.Type, err)
	}
}

// MustRead reads a frame of type want from s and returns a copy of its payload, failing the test
// on another type or an error.
func MustRead(t testing.TB, s tunnel.Stream, want tunnel.FrameType) []byte {
	t.Helper()
	f, err := s.ReadFrame()
	if err != nil || f.Type != want {
		t.Fatalf("read: type %d, %v; want type %d", f.Type, err, want)
	}
	return bytes.Clone(f.Payload)
}

// ReadAbort reads an Abort frame from s and returns its code and reason.
func ReadAbort(t testing.TB, s tunnel.Stream) (tunnel.Code, string) {
	t.Helper()
	return tunnel.ParseAbort(MustRead(t, s, tunnel.Abort))
}
