//go:build !unix

package cli

import (
	"io"
	"os"
)

// pollableInput is never available here: the caller reads standard input from a goroutine of
// its own.
func pollableInput(io.Reader) (f *os.File, restore func(), ok bool) { return nil, nil, false }
