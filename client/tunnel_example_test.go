package client_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/better-compute/better-compute/client"
)

// The tunnel example client/README.md shows; it is compiled with the tests.

func Example_tunnel() {
	conn, err := c.Tunnel(ctx, nodeID, 22) // port 22 on the node's loopback
	if err != nil {
		log.Fatal(err) // a *client.TunnelRefusedError says why it was refused (404 no such ticket, 503 node offline, …)
	}
	defer conn.Close()
	fmt.Println("tunnel", conn.Info().GetId(), "open")
	go func() {
		if _, err := io.Copy(conn, os.Stdin); err == nil {
			_ = conn.CloseWrite() // the node's sshd reads EOF; its answer keeps coming
		}
	}()
	if _, err := io.Copy(os.Stdout, conn); err != nil { // until the node's end closes its side
		var ae *client.TunnelAbortError
		if errors.As(err, &ae) {
			log.Fatalf("tunnel aborted: %d (%s): %s", ae.Code, ae.Code.Describe(), ae.Reason) // 4005: nothing listens on the port
		}
		log.Fatal(err)
	}
}
