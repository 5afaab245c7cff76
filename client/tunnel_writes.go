package client

import (
	"encoding/binary"
	"io"
	"net/http"
	"sync"
)

// The WebSocket library writes a client's frames through a 4 KiB buffer (it masks the payload
// there), so a tunnel's 64 KiB Data frame left the client as 16 writes, 16 system calls and, over
// TLS, 16 records: most of the client's CPU per byte (docs/benchmarks.md). frameWrites gathers
// the pieces of each frame and writes the frame at once.

// frameWritesTransport is an http.RoundTripper that gives a WebSocket's 101 response a body that
// writes whole frames (frameWrites).
type frameWritesTransport struct{ base http.RoundTripper }

func (t frameWritesTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		return res, err
	}
	if rwc, ok := res.Body.(io.ReadWriteCloser); ok {
		res.Body = &frameWrites{ReadWriteCloser: rwc}
	}
	return res, nil
}

// withFrameWrites is hc (nil: http.DefaultClient) with its transport's WebSockets writing whole
// frames.
func withFrameWrites(hc *http.Client) *http.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	c := *hc
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = frameWritesTransport{base}
	return &c
}

// maxPendingWrite bounds what frameWrites holds of one frame before it writes it on: a frame
// longer than this (none of a tunnel's) goes out in pieces of about this size.
const maxPendingWrite = 128 << 10

// pendingWrites holds frameWrites' buffers while they hold a frame, so that an idle tunnel holds
// none.
var pendingWrites = sync.Pool{New: func() any { b := make([]byte, 0, maxPendingWrite+4<<10); return &b }}

// frameWrites is a WebSocket's byte stream that holds what is written until it ends a frame (it
// reads the frames' headers for their lengths), then writes it in one call. It delays no byte past
// the end of the frame it belongs to: the writer writes a frame's pieces one after the other.
type frameWrites struct {
	io.ReadWriteCloser
	mu      sync.Mutex
	pending *[]byte // bytes not written yet; nil when none
	pos     int     // where, in pending, the frame being read starts, or its payload ends
	inFrame bool    // pos is the end of a frame whose header was read (it may lie past pending)
}

// Write takes p; it writes what it holds once that ends a frame.
func (w *frameWrites) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending == nil {
		w.pending = pendingWrites.Get().(*[]byte)
	}
	buf := append(*w.pending, p...)
	*w.pending = buf
	for {
		if w.inFrame {
			if w.pos > len(buf) {
				break
			}
			w.inFrame = false // the frame is all here
			continue
		}
		hl, pl, ok := frameHeader(buf[w.pos:])
		if !ok {
			break
		}
		w.pos += hl + pl
		w.inFrame = true
	}
	var err error
	switch {
	case !w.inFrame && w.pos == len(buf): // whole frames: write them
		err = w.flush()
	case w.inFrame && len(buf) >= maxPendingWrite: // a long frame: write what came of it
		err = w.flush()
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// flush writes all it holds, and returns the buffer to the pool between frames.
func (w *frameWrites) flush() error {
	buf := *w.pending
	_, err := w.ReadWriteCloser.Write(buf)
	w.pos -= len(buf) // 0 between frames; else what is to come of the frame
	*w.pending = buf[:0]
	if !w.inFrame {
		pendingWrites.Put(w.pending)
		w.pending = nil
	}
	return err
}

// frameHeader reads a WebSocket frame's header (RFC 6455, 5.2) at the start of b: its length
// and that of the payload; ok is false when b does not hold all of it yet.
func frameHeader(b []byte) (headerLen, payloadLen int, ok bool) {
	if len(b) < 2 {
		return 0, 0, false
	}
	headerLen, n := 2, uint64(b[1]&0x7f)
	switch n {
	case 126:
		headerLen = 4
	case 127:
		headerLen = 10
	}
	if b[1]&0x80 != 0 {
		headerLen += 4 // the masking key
	}
	if len(b) < headerLen {
		return 0, 0, false
	}
	switch n {
	case 126:
		n = uint64(binary.BigEndian.Uint16(b[2:4]))
	case 127:
		n = binary.BigEndian.Uint64(b[2:10]) & (1<<63 - 1)
	}
	return headerLen, int(min(n, 1<<30)), true
}
