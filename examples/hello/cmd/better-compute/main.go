// Command better-compute is Better Compute built with the hello module: the standard binary's
// modules and one more, as a custom build's main is.
package main

import (
	compute "github.com/better-compute/better-compute"
	"github.com/better-compute/better-compute/examples/hello"
)

func main() { compute.Main(append(compute.StandardModules(), hello.Info())...) }
