// Package limittest makes hostile request bodies for tests of the servers' limits.
package limittest

import (
	"bytes"
	"compress/gzip"
	"runtime"
	"testing"
)

// GzipBomb returns gzip data that inflates to inflated bytes of zeros (rounded up to a whole
// MiB): a MiB of zeros streamed through gzip.Writer, its member repeated, which gzip readers
// treat as one stream. 1 GiB takes about a megabyte, made in well under a second even with the
// race detector (which slows compress/flate down a hundredfold).
func GzipBomb(tb testing.TB, inflated int64) []byte {
	tb.Helper()
	const member = 1 << 20
	zeros := make([]byte, member)
	var one bytes.Buffer
	w, err := gzip.NewWriterLevel(&one, gzip.BestCompression)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := w.Write(zeros); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	var out bytes.Buffer
	for left := inflated; left > 0; left -= member {
		out.Write(one.Bytes())
	}
	return out.Bytes()
}

// AllocatedDuring is how many bytes the whole process allocated while f ran (TotalAlloc growth,
// so tests running meanwhile count too: compare it with a bound far above their share).
func AllocatedDuring(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
