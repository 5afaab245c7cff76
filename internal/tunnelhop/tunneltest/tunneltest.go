// Package tunneltest has what tests of tunnels share: a port on the "node" that echoes.
package tunneltest

import (
	"io"
	"net"
	"testing"
)

// EchoPort listens on a loopback port until the test ends: each connection is echoed until its
// EOF, then farewell (may be empty) is written, showing that bytes after a half-close arrive,
// and the connection closes. It returns the port.
func EchoPort(t testing.TB, farewell string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
				if farewell != "" {
					_, _ = io.WriteString(c, farewell)
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}
