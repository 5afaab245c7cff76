//go:build !race

package tunnels_test

const (
	// transferSize is what TestTransfer sends each way: 1 GiB, the figure.
	transferSize = 1 << 30
	raceEnabled  = false
)
