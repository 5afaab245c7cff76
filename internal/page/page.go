// Package page implements the API's cursor pagination: opaque page tokens that hold the last
// key seen, so a page starts exactly after the previous one. Because every list is ordered by a
// unique key, rows that existed when paging started are neither skipped nor repeated, however
// many rows are inserted meanwhile.
package page

import (
	"encoding/base64"
	"encoding/json"

	"github.com/better-compute/better-compute/internal/apierr"
)

// Sizes of a page: a request for 0 gets DefaultSize, and any request is capped at MaxSize.
const (
	DefaultSize = 50
	MaxSize     = 500
)

// Size validates a requested page size and applies the default and the cap.
func Size(requested int32) (int32, error) { return SizeWithin(requested, DefaultSize, MaxSize) }

// SizeWithin is Size for a list whose API documents another default and cap (def for 0, at most
// maxSize): small rows a view wants many of at once, say.
func SizeWithin(requested, def, maxSize int32) (int32, error) {
	switch {
	case requested < 0:
		return 0, apierr.InvalidArgument("page_size", "must not be negative")
	case requested == 0:
		return def, nil
	case requested > maxSize:
		return maxSize, nil
	}
	return requested, nil
}

// token is what a page token holds: the last key of the previous page.
type token[K any] struct {
	After K `json:"a"`
}

// Parse reads a page token into the key after which the page starts; an empty token gives
// first.
func Parse[K any](tok string, first K) (K, error) {
	if tok == "" {
		return first, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	var t token[K]
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil {
		return first, apierr.InvalidArgument("page_token", "malformed; pass back next_page_token unchanged")
	}
	return t.After, nil
}

// Next returns the page of rows and the token of the next page. rows holds up to size+1 rows
// (fetch one more than the page to learn whether another page follows); key gives a row's key.
func Next[R, K any](rows []R, size int32, key func(R) K) ([]R, string) {
	if int32(len(rows)) <= size {
		return rows, ""
	}
	rows = rows[:size]
	b, _ := json.Marshal(token[K]{After: key(rows[len(rows)-1])})
	return rows, base64.RawURLEncoding.EncodeToString(b)
}

// Of validates a list request's page size and token, returning the size to fetch and the key
// after which the page starts (first for the first page).
func Of[K any](size int32, tok string, first K) (int32, K, error) {
	n, err := Size(size)
	if err != nil {
		return 0, first, err
	}
	after, err := Parse(tok, first)
	return n, after, err
}
