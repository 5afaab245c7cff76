package limit

import "io"

// Answer bounds an answer's body that a server reads from a third party (an identity provider,
// a provider's API) to n bytes: a read that would go past n fails with tooLarge instead of
// truncating silently, so a caller never acts on a cut-off document.
func Answer(rc io.ReadCloser, n int64, tooLarge error) io.ReadCloser {
	return &answer{rc: rc, left: n, tooLarge: tooLarge}
}

// answer is the body Answer returns.
type answer struct {
	rc       io.ReadCloser
	left     int64
	tooLarge error
}

func (b *answer) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := b.rc.Read(one[:])
		if n > 0 {
			return 0, b.tooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *answer) Close() error { return b.rc.Close() }
