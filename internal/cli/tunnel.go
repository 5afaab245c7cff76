package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/process"
)

func newTunnelCommand(api *Resolver) *cobra.Command {
	var (
		nodeID, local string
		port          int
		stdio         bool
	)
	cmd := &cobra.Command{
		Use:   "tunnel",
		Short: "Reach a port on a node's loopback through the API",
		Long: `Open tunnels to --port on the loopback of node --node, through the API (--api, --api-key)
and the gateway holding the node's session; the node accepts no inbound connection.

--local 127.0.0.1:L listens there and forwards each accepted connection through a tunnel of
its own (a ticket each), until Ctrl-C. --stdio carries one connection on standard input and
output, half-closing when standard input ends, for ssh:

  ssh -o ProxyCommand='better-compute tunnel --node %h --port 22 --stdio' user@NODE_ID

The node's spec (or the pool of a lease on it) must list the port in tunnel_ports, and its
daemon must allow it (bcd run --tunnel-port P). A tunnel that ends otherwise than by both
sides closing prints its close code and reason (docs/tunnels.md) and, with --stdio, exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, err := api.Resolve()
			if err != nil {
				return err
			}
			if port < 1 || port > 65535 {
				return fmt.Errorf("--port must be 1 to 65535, got %d", port)
			}
			c := client.New(t.URL, client.WithAPIKey(t.APIKey))
			if stdio {
				return tunnelStdio(cmd.Context(), c, nodeID, port, cmd.InOrStdin(), cmd.OutOrStdout())
			}
			ln, err := net.Listen("tcp", local)
			if err != nil {
				return fmt.Errorf("--local: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Forwarding %s to node %s port %d\n", ln.Addr(), nodeID, port)
			return tunnelListen(cmd.Context(), c, nodeID, port, ln, process.NewLogger(config.Default().Log, cmd.ErrOrStderr()))
		},
	}
	f := cmd.Flags()
	f.StringVar(&nodeID, "node", "", "node id (required)")
	f.IntVar(&port, "port", 0, "port on the node's loopback, 1 to 65535 (required)")
	f.StringVar(&local, "local", "", "listen on this address, host:port, and forward each connection")
	f.BoolVar(&stdio, "stdio", false, "carry one connection on standard input and output")
	_ = cmd.MarkFlagRequired("node")
	_ = cmd.MarkFlagRequired("port")
	cmd.MarkFlagsOneRequired("local", "stdio")
	cmd.MarkFlagsMutuallyExclusive("local", "stdio")
	return cmd
}

// tunnelStdio carries one tunnel on in and out: in's EOF half-closes, the node's end's
// half-close closes out. It returns nil once both sides closed, the *tunnel.AbortError of an
// aborted tunnel, or ctx's error when interrupted (the tunnel is then reset).
func tunnelStdio(ctx context.Context, c *client.Client, nodeID string, port int, in io.Reader, out io.Writer) error {
	s, _, err := c.TunnelStream(ctx, nodeID, port)
	if err != nil {
		return err
	}
	if err := pump(ctx, newStdioConn(in, out), s); err != nil {
		return fmt.Errorf("tunnel to node %s port %d: %w", nodeID, port, err)
	}
	return nil
}

// pump joins local and s with tunnel.Pump until the tunnel ends, or resets it when ctx ends.
func pump(ctx context.Context, local tunnel.Conn, s *tunnel.WebSocketStream) error {
	stop := context.AfterFunc(ctx, func() {
		_ = s.CloseWith(tunnel.CodeReset, "better-compute tunnel was interrupted")
		_ = local.Close()
	})
	err := tunnel.Pump(local, s)
	if !stop() && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// tunnelListen forwards each connection ln accepts through a tunnel of its own until ctx ends,
// then resets the open ones and returns nil.
func tunnelListen(ctx context.Context, c *client.Client, nodeID string, port int, ln net.Listener, log *slog.Logger) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Go(func() {
			from := conn.RemoteAddr().String()
			local, ok := conn.(tunnel.Conn)
			if !ok { // not TCP: cannot half-close
				_ = conn.Close()
				log.Error("tunnel: the local connection cannot half-close", "from", from)
				return
			}
			s, info, err := c.TunnelStream(ctx, nodeID, port)
			if err != nil {
				_ = conn.Close()
				log.Error("tunnel: not opened", "from", from, "err", err)
				return
			}
			log.Info("tunnel opened", "from", from, "tunnel_id", info.GetId())
			err = pump(ctx, local, s)
			var ae *tunnel.AbortError
			switch {
			case err == nil, ctx.Err() != nil:
				log.Info("tunnel closed", "from", from, "tunnel_id", info.GetId())
			case errors.As(err, &ae):
				log.Warn("tunnel aborted", "from", from, "tunnel_id", info.GetId(), "code", int(ae.Code), "why", ae.Code.Describe(), "reason", ae.Reason)
			default:
				log.Warn("tunnel failed", "from", from, "tunnel_id", info.GetId(), "err", err)
			}
		})
	}
}

// stdioConn is a tunnel.Conn over standard input and output. Input that is a pipe or a socket
// (ssh's ProxyCommand gives a pipe) is read directly, through the runtime's poller
// (pollableInput), so that Close returns a pending Read at once; any other input (a terminal) is
// read by a goroutine, one buffer at a time, for the same reason: a blocking read cannot be
// interrupted. Reading a pipe directly spares each buffer a hand-over between goroutines: the
// goroutine's hand-over halved --stdio's throughput from the client (docs/benchmarks.md).
// CloseWrite closes out (the reader of our output sees EOF).
type stdioConn struct {
	out     io.Writer
	file    *os.File // pollable input, read directly; nil: reads come from the goroutine
	restore func()   // file's: closes it and makes the input blocking again
	reads   chan stdioRead
	next    chan struct{} // the last read's buffer may be reused
	closed  chan struct{}
	once    sync.Once
	rest    []byte
	err     error
}

type stdioRead struct {
	b   []byte
	err error
}

func newStdioConn(in io.Reader, out io.Writer) *stdioConn {
	c := &stdioConn{out: out, reads: make(chan stdioRead), next: make(chan struct{}), closed: make(chan struct{})}
	if f, restore, ok := pollableInput(in); ok {
		c.file, c.restore = f, restore
		return c
	}
	go func() {
		buf := make([]byte, tunnel.MaxPayload)
		for {
			n, err := in.Read(buf)
			select {
			case c.reads <- stdioRead{buf[:n], err}:
			case <-c.closed:
				return
			}
			if err != nil {
				return
			}
			select {
			case <-c.next:
			case <-c.closed:
				return
			}
		}
	}()
	return c
}

func (c *stdioConn) Read(p []byte) (int, error) {
	if c.file != nil {
		n, err := c.file.Read(p)
		if errors.Is(err, os.ErrClosed) {
			err = net.ErrClosed
		}
		return n, err
	}
	if len(c.rest) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		select {
		case r := <-c.reads:
			c.rest, c.err = r.b, r.err
		case <-c.closed:
			return 0, net.ErrClosed
		}
		if len(c.rest) == 0 {
			if c.err == nil {
				c.release()
			}
			return 0, c.err
		}
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	if len(c.rest) == 0 && c.err == nil {
		c.release()
	}
	return n, nil
}

// release lets the reading goroutine reuse its buffer.
func (c *stdioConn) release() {
	select {
	case c.next <- struct{}{}:
	case <-c.closed:
	}
}

func (c *stdioConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// CloseWrite closes standard output.
func (c *stdioConn) CloseWrite() error {
	if cl, ok := c.out.(io.Closer); ok {
		return cl.Close()
	}
	return nil
}

// Close stops reading and closes standard output.
func (c *stdioConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		if c.restore != nil {
			c.restore()
		}
	})
	_ = c.CloseWrite()
	return nil
}
