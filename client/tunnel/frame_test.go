package tunnel_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/better-compute/better-compute/client/tunnel"
)

// testFrames are one of each kind, with the payloads at the bounds.
var testFrames = []tunnel.Frame{
	{Type: tunnel.Data, Payload: []byte("hello")},
	{Type: tunnel.Data, Payload: []byte{}},
	{Type: tunnel.Data, Payload: bytes.Repeat([]byte{0xa5}, tunnel.MaxPayload)},
	{Type: tunnel.CloseWrite, Payload: []byte{}},
	{Type: tunnel.Abort, Payload: tunnel.AbortPayload(tunnel.CodeDialFailed, "connection refused")},
}

func equalFrame(a, b tunnel.Frame) bool {
	return a.Type == b.Type && bytes.Equal(a.Payload, b.Payload)
}

// TestFramesRoundTrip: frames written on a byte stream read back the same, one byte at a time
// as well as at once, and the stream's end between frames is io.EOF; as WebSocket messages too.
func TestFramesRoundTrip(t *testing.T) {
	t.Parallel()
	var b []byte
	for _, f := range testFrames {
		b = tunnel.AppendFrame(b, f)
	}
	for name, r := range map[string]io.Reader{
		"whole":       bytes.NewReader(b),
		"byte a time": iotest.OneByteReader(bytes.NewReader(b)),
	} {
		fr := tunnel.NewFrameReader(r)
		for i, want := range testFrames {
			got, err := fr.Read()
			if err != nil || !equalFrame(got, want) {
				t.Fatalf("%s: frame %d: type %d, %d bytes, %v; want type %d, %d bytes", name, i, got.Type, len(got.Payload), err, want.Type, len(want.Payload))
			}
		}
		if _, err := fr.Read(); !errors.Is(err, io.EOF) || errors.Is(err, tunnel.ErrProtocol) {
			t.Errorf("%s: after the last frame: %v, want io.EOF", name, err)
		}
	}
	for i, want := range testFrames {
		got, err := tunnel.ParseMessage(tunnel.AppendMessage(nil, want))
		if err != nil || !equalFrame(got, want) {
			t.Errorf("message %d: type %d, %d bytes, %v", i, got.Type, len(got.Payload), err)
		}
	}
}

// TestMalformedFrames: an unknown type, a payload over 64 KiB, or a stream that ends inside a
// frame is a protocol error, found without reading the oversized payload.
func TestMalformedFrames(t *testing.T) {
	t.Parallel()
	header := func(typ byte, n uint32) []byte { return binary.BigEndian.AppendUint32([]byte{typ}, n) }
	for name, in := range map[string][]byte{
		"unknown type":              tunnel.AppendFrame(nil, tunnel.Frame{Type: tunnel.Abort + 1}),
		"payload over the bound":    header(byte(tunnel.Data), tunnel.MaxPayload+1),
		"length of 4 GiB":           header(byte(tunnel.Data), 1<<32-1),
		"end inside the header":     {0, 0, 0},
		"end inside the payload":    append(header(byte(tunnel.Data), 10), "short"...),
		"end before a CloseWrite's": header(byte(tunnel.CloseWrite), 1),
	} {
		// The oversized payloads are not there: a reader that read on would find the stream's
		// end and report it differently.
		_, err := tunnel.NewFrameReader(bytes.NewReader(in)).Read()
		if !errors.Is(err, tunnel.ErrProtocol) {
			t.Errorf("%s: %v, want a protocol error", name, err)
		}
	}
	for name, msg := range map[string][]byte{
		"empty message":            {},
		"unknown type":             {byte(tunnel.Abort + 1), 'x'},
		"payload over the bound":   make([]byte, 1+tunnel.MaxPayload+1),
		"text type byte and bytes": []byte("hello"),
	} {
		if _, err := tunnel.ParseMessage(msg); !errors.Is(err, tunnel.ErrProtocol) {
			t.Errorf("message: %s: %v, want a protocol error", name, err)
		}
	}
}

// TestTransportErrorInsideAFrame: a stream whose transport fails inside a frame (a gateway
// that died mid-transfer) is lost, not malformed: the error is the transport's, not a protocol
// error, so a relay ends the tunnel with its lost code (4006) rather than 4007.
func TestTransportErrorInsideAFrame(t *testing.T) {
	t.Parallel()
	lost := errors.New("write: broken pipe")
	in := io.MultiReader(bytes.NewReader(binary.BigEndian.AppendUint32([]byte{byte(tunnel.Data)}, 10)),
		bytes.NewReader([]byte("short")), iotest.ErrReader(lost))
	_, err := tunnel.NewFrameReader(in).Read()
	if !errors.Is(err, lost) || errors.Is(err, tunnel.ErrProtocol) {
		t.Fatalf("%v: want the transport's error, not a protocol error", err)
	}
}

// TestAbortPayload: a code and reason round-trip; a long reason is cut to 123 bytes on a rune
// boundary (what a WebSocket close frame carries); a payload without a code is a protocol error.
func TestAbortPayload(t *testing.T) {
	t.Parallel()
	code, reason := tunnel.ParseAbort(tunnel.AbortPayload(tunnel.CodeLeaseEnded, "lease 42 ended"))
	if code != tunnel.CodeLeaseEnded || reason != "lease 42 ended" {
		t.Errorf("got %d %q", code, reason)
	}
	long := strings.Repeat("é", 100) // 200 bytes, two per rune
	_, reason = tunnel.ParseAbort(tunnel.AbortPayload(tunnel.CodeReset, long))
	if len(reason) > 123 || len(reason) < 121 || !utf8.ValidString(reason) || !strings.HasPrefix(long, reason) {
		t.Errorf("a long reason became %d bytes %q", len(reason), reason)
	}
	for _, p := range [][]byte{nil, {0x0f}} {
		if code, _ := tunnel.ParseAbort(p); code != tunnel.CodeProtocol {
			t.Errorf("abort payload %x: code %d, want %d", p, code, tunnel.CodeProtocol)
		}
	}
	err := error(&tunnel.AbortError{Code: tunnel.CodeDialFailed, Reason: "connection refused"})
	if msg := err.Error(); !strings.Contains(msg, "4005") || !strings.Contains(msg, "connection refused") {
		t.Errorf("AbortError says %q", msg)
	}
}

// TestCodes: every code says what it means, and codes are distinct.
func TestCodes(t *testing.T) {
	t.Parallel()
	seen := map[tunnel.Code]bool{}
	for _, c := range tunnel.Codes {
		if c.Describe() == "unknown" || seen[c] {
			t.Errorf("code %d: %q, seen before: %v", c, c.Describe(), seen[c])
		}
		seen[c] = true
	}
	if d := tunnel.Code(4999).Describe(); d != "unknown" {
		t.Errorf("code 4999 says %q", d)
	}
}
