package client_test

import (
	"fmt"

	"github.com/better-compute/better-compute/client"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
)

// The field violations example client/README.md shows (c and ctx are example_test.go's); it is
// compiled with the tests.
func ExampleFieldViolations() {
	_, err := c.Nodes.Get(ctx, &nodesv1.GetRequest{Id: "x"})
	for _, v := range client.FieldViolations(err) {
		fmt.Println(v.Field, v.Description) // id must be a UUID, got "x"
	}
}
