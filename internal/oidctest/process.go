package oidctest

import (
	"fmt"
	"net"
)

// freePort returns a port that was free on every interface a moment ago: the server listens on
// all of them.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, fmt.Errorf("choose a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
