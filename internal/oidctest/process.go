package oidctest

import (
	"fmt"
	"net"
)

// freePort returns a port that was free on 127.0.0.1 a moment ago, where the server listens.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("choose a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
