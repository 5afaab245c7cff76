package sim

import (
	"bytes"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// maxDelayed bounds the bytes a delayed connection holds in each direction: more than a tunnel
// connection's flow-control window (with TLS and HTTP/2 framing), so the delay never lowers
// throughput below what the windows allow, and no more, so memory stays bounded. Beyond it the
// connection stops reading, or Write blocks, as a full network path would.
const maxDelayed = tunnelhop.ConnWindow + tunnelhop.ConnWindow/8

// DelayConn returns c with every byte delayed by oneWay in each direction, as a network path
// with a round trip of 2 × oneWay would: what arrives on c is handed to Read oneWay after it
// arrived, and what Write is given goes out on c oneWay later (Write returns at once, as it
// does once the kernel has the bytes). Order is kept, and throughput is not reduced: bytes in
// flight wait in a queue each way (at most maxDelayed), each going out when due. An end of the
// stream or error arrives oneWay late too; a failed write closes the connection. Close drops
// what has not gone out. Read deadlines are honoured; write deadlines apply to the writes on c.
func DelayConn(c net.Conn, oneWay time.Duration) net.Conn {
	d := &delayedConn{Conn: c, delay: oneWay, in: newDelayQueue(), out: newDelayQueue(), closed: make(chan struct{})}
	go d.fill()
	go d.drain()
	return d
}

type delayedConn struct {
	net.Conn
	delay   time.Duration
	in, out *delayQueue
	closed  chan struct{}
	once    sync.Once
	// readMu makes Reads one at a time: a read may take part of the head chunk.
	readMu       sync.Mutex
	readDeadline atomic.Pointer[time.Time]
	writeErr     atomic.Pointer[error]
}

// delayedChunk is bytes (or the error that ended the stream) due at a time.
type delayedChunk struct {
	at  time.Time
	b   []byte
	err error
}

// delayQueue is a FIFO of chunks, bounded by maxDelayed bytes.
type delayQueue struct {
	mu     sync.Mutex
	chunks []delayedChunk
	head   int
	bytes  int
	// wake is closed and replaced whenever the queue changes.
	wake chan struct{}
}

func newDelayQueue() *delayQueue { return &delayQueue{wake: make(chan struct{})} }

func (q *delayQueue) changed() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// poke wakes the waiters, to look at a changed deadline.
func (q *delayQueue) poke() {
	q.mu.Lock()
	q.changed()
	q.mu.Unlock()
}

// put appends c, waiting while the queue is full; false if done closed first. A chunk larger
// than the bound goes into an empty queue.
func (q *delayQueue) put(c delayedChunk, done <-chan struct{}) bool {
	q.mu.Lock()
	for q.bytes > 0 && q.bytes+len(c.b) > maxDelayed {
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-wake:
		case <-done:
			return false
		}
		q.mu.Lock()
	}
	q.chunks = append(q.chunks, c)
	q.bytes += len(c.b)
	q.changed()
	q.mu.Unlock()
	return true
}

// peek returns the head chunk, if any, and a channel closed when the queue changes.
func (q *delayQueue) peek() (delayedChunk, bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.chunks) {
		return delayedChunk{}, false, q.wake
	}
	return q.chunks[q.head], true, q.wake
}

// consume takes n bytes off the head chunk, and the chunk once it is empty (an error chunk
// stays: the stream has ended).
func (q *delayQueue) consume(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	h := &q.chunks[q.head]
	h.b = h.b[n:]
	q.bytes -= n
	if len(h.b) == 0 && h.err == nil {
		q.chunks[q.head] = delayedChunk{}
		q.head++
		switch {
		case q.head == len(q.chunks):
			q.chunks, q.head = q.chunks[:0], 0
		case q.head > 64 && q.head*2 > len(q.chunks):
			q.chunks = q.chunks[:copy(q.chunks, q.chunks[q.head:])]
			q.head = 0
		}
	}
	q.changed()
}

// due waits until q's head chunk is due and returns it; net.ErrClosed once the connection is
// closed, os.ErrDeadlineExceeded when deadline (if any) passes first.
func (c *delayedConn) due(q *delayQueue, deadline func() time.Time) (delayedChunk, error) {
	for {
		select {
		case <-c.closed:
			return delayedChunk{}, net.ErrClosed
		default:
		}
		h, ok, wake := q.peek()
		wait := time.Duration(-1) // until the queue changes
		if ok {
			if wait = time.Until(h.at); wait <= 0 {
				return h, nil
			}
		}
		expired := false
		if dl := deadline(); !dl.IsZero() {
			left := time.Until(dl)
			if left <= 0 {
				return delayedChunk{}, os.ErrDeadlineExceeded
			}
			if wait < 0 || left < wait {
				wait, expired = left, true
			}
		}
		var (
			t     *time.Timer
			fired <-chan time.Time
		)
		if wait >= 0 {
			t = time.NewTimer(wait)
			fired = t.C
		}
		select {
		case <-wake:
		case <-fired:
			if expired {
				return delayedChunk{}, os.ErrDeadlineExceeded
			}
		case <-c.closed:
			if t != nil {
				t.Stop()
			}
			return delayedChunk{}, net.ErrClosed
		}
		if t != nil {
			t.Stop()
		}
	}
}

// fill reads what arrives and queues it, due oneWay later.
func (c *delayedConn) fill() {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Conn.Read(buf)
		if n > 0 && !c.in.put(delayedChunk{at: time.Now().Add(c.delay), b: bytes.Clone(buf[:n])}, c.closed) {
			return
		}
		if err != nil {
			c.in.put(delayedChunk{at: time.Now().Add(c.delay), err: err}, c.closed)
			return
		}
	}
}

// drain writes what Write queued, each chunk when due.
func (c *delayedConn) drain() {
	for {
		h, err := c.due(c.out, func() time.Time { return time.Time{} })
		if err != nil {
			return
		}
		if _, err := c.Conn.Write(h.b); err != nil {
			c.writeErr.Store(&err)
			_ = c.Close()
			return
		}
		c.out.consume(len(h.b))
	}
}

func (c *delayedConn) Read(p []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	h, err := c.due(c.in, c.deadline)
	if err != nil {
		return 0, err
	}
	if len(h.b) == 0 {
		return 0, h.err
	}
	n := copy(p, h.b)
	c.in.consume(n)
	return n, nil
}

func (c *delayedConn) deadline() time.Time {
	if t := c.readDeadline.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

func (c *delayedConn) Write(p []byte) (int, error) {
	if err := c.writeErr.Load(); err != nil {
		return 0, *err
	}
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !c.out.put(delayedChunk{at: time.Now().Add(c.delay), b: bytes.Clone(p)}, c.closed) {
		if err := c.writeErr.Load(); err != nil {
			return 0, *err
		}
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (c *delayedConn) Close() error {
	err := net.ErrClosed
	c.once.Do(func() {
		close(c.closed)
		err = c.Conn.Close()
	})
	return err
}

func (c *delayedConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

func (c *delayedConn) SetReadDeadline(t time.Time) error {
	c.readDeadline.Store(&t)
	c.in.poke()
	return nil
}
