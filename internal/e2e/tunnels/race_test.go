//go:build race

package tunnels_test

const (
	// transferSize is what TestTransfer sends each way under the race detector, which slows the
	// copies at every hop tenfold or more: 32 MiB keeps the run short; the 1 GiB of the issue
	// runs without it (norace_test.go).
	transferSize = 32 << 20
	// raceEnabled builds the CLI under test with the race detector too.
	raceEnabled = true
)
