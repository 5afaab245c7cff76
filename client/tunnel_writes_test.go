package client

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// recorder records each write it is given.
type recorder struct {
	writes [][]byte
}

func (r *recorder) Read([]byte) (int, error) { return 0, nil }
func (r *recorder) Write(p []byte) (int, error) {
	r.writes = append(r.writes, append([]byte(nil), p...))
	return len(p), nil
}
func (r *recorder) Close() error { return nil }

// frame is a masked client frame (RFC 6455) of a payload of n bytes.
func frame(n int) []byte {
	var h []byte
	switch {
	case n < 126:
		h = []byte{0x82, 0x80 | byte(n)}
	case n < 1<<16:
		h = binary.BigEndian.AppendUint16([]byte{0x82, 0x80 | 126}, uint16(n))
	default:
		h = binary.BigEndian.AppendUint64([]byte{0x82, 0x80 | 127}, uint64(n))
	}
	h = append(h, 1, 2, 3, 4) // masking key
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(rand.N(256))
	}
	return append(h, p...)
}

// TestFrameWrites: frames written in pieces of any size (a header split too) go out whole, one
// write a frame (or more frames, when a write ends several), in order; a frame longer than
// maxPendingWrite goes out in pieces, all of it.
func TestFrameWrites(t *testing.T) {
	t.Parallel()
	sizes := []int{0, 1, 125, 126, 4091, 4096, 65535, 65536, 1 + 64<<10, 100, 3*maxPendingWrite + 17}
	var stream []byte
	var frames [][]byte
	for _, n := range sizes {
		f := frame(n)
		frames = append(frames, f)
		stream = append(stream, f...)
	}
	for _, piece := range []int{1, 3, 4096, 10000, 1 << 20} {
		r := &recorder{}
		w := &frameWrites{ReadWriteCloser: r}
		for rest := stream; len(rest) > 0; {
			n := min(piece, len(rest))
			if got, err := w.Write(rest[:n]); got != n || err != nil {
				t.Fatalf("pieces of %d: Write = %d, %v", piece, got, err)
			}
			rest = rest[n:]
		}
		if got := bytes.Join(r.writes, nil); !bytes.Equal(got, stream) {
			t.Fatalf("pieces of %d: %d bytes written of %d, or not in order", piece, len(got), len(stream))
		}
		if w.pending != nil {
			t.Errorf("pieces of %d: a buffer is held between frames", piece)
		}
		if piece > len(stream) {
			continue // one write of everything
		}
		// Every write but those of the long frame ends at a frame's end.
		ends, at := map[int]bool{}, 0
		for _, f := range frames {
			at += len(f)
			ends[at] = true
		}
		at = 0
		for i, wr := range r.writes {
			at += len(wr)
			if !ends[at] && len(wr) < maxPendingWrite {
				t.Errorf("pieces of %d: write %d (%d bytes) ends inside a frame", piece, i, len(wr))
			}
		}
	}
}
