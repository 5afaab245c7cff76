// Command better-compute is the control plane: one binary, every role, started from one
// configuration, with the standard modules compiled in. A custom build is the same five lines
// with more modules (docs/modules.md).
package main

import compute "github.com/better-compute/better-compute"

func main() { compute.Main(compute.StandardModules()...) }
