package gateway

import "testing"

// TestFanOutClaimLimit: a claim of small commands sends a whole fan-out of the largest
// max_in_flight at once; one of large payloads stays within fanOutClaimBytes; a payload larger
// than that still moves, one command a claim.
func TestFanOutClaimLimit(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		payload int64
		want    int32
	}{
		{0, fanOutBatch},
		{2, fanOutBatch},
		{200 << 10, 163},
		{fanOutClaimBytes, 1},
		{4 * fanOutClaimBytes, 1},
	} {
		got := fanOutClaimLimit(c.payload)
		if got != c.want {
			t.Errorf("fanOutClaimLimit(%d) = %d, want %d", c.payload, got, c.want)
		}
		if got > 1 && int64(got)*c.payload > fanOutClaimBytes {
			t.Errorf("fanOutClaimLimit(%d) = %d: %d bytes, over %d", c.payload, got, int64(got)*c.payload, fanOutClaimBytes)
		}
	}
}
