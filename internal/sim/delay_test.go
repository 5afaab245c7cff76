package sim_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/sim"
)

// TestDelayConn checks DelayConn both ways over a real TCP connection: every chunk arrives at
// least the one-way delay after it was written, in order and intact, an end of stream arrives
// after the data, read deadlines work, and Close ends Read and Write.
func TestDelayConn(t *testing.T) {
	t.Parallel()
	const (
		delay  = 30 * time.Millisecond
		chunks = 2000
		size   = 1024
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c := sim.DelayConn(raw, delay)
	defer c.Close()

	// A read deadline with nothing due ends the read.
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v", err)
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}

	base := time.Now()
	// send writes numbered chunks stamped with their time of writing, then half-closes when it can.
	send := func(w io.Writer) error {
		buf := make([]byte, size)
		for i := range chunks {
			binary.BigEndian.PutUint64(buf, uint64(i))
			binary.BigEndian.PutUint64(buf[8:], uint64(time.Since(base)))
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	// receive checks every chunk arrived in order, intact, and no sooner than the delay after
	// it was written.
	receive := func(r io.Reader) error {
		buf := make([]byte, size)
		for i := range chunks {
			if _, err := io.ReadFull(r, buf); err != nil {
				return err
			}
			got, sent := binary.BigEndian.Uint64(buf), time.Duration(binary.BigEndian.Uint64(buf[8:]))
			if got != uint64(i) {
				return errors.New("chunks out of order")
			}
			if after := time.Since(base) - sent; after < delay {
				return fmt.Errorf("chunk %d arrived %v after it was written, less than the delay %v", i, after, delay)
			}
		}
		return nil
	}
	errs := make(chan error, 4)
	go func() { errs <- send(c) }()
	go func() { errs <- receive(peer) }()
	go func() {
		err := send(peer)
		if err == nil {
			err = peer.(*net.TCPConn).CloseWrite()
		}
		errs <- err
	}()
	go func() {
		err := receive(c)
		if err == nil {
			// The peer's end of stream comes after its data.
			if _, err = c.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
				err = nil
			} else {
				err = errors.New("no EOF after the data")
			}
		}
		errs <- err
	}()
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	// Closed: Read and Write fail at once.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if _, err := c.Write([]byte("x")); err == nil {
		t.Error("write after close succeeded")
	}
}
