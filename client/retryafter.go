package client

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
)

// RetryAfterHeader is the header with which the API says how long to wait before a refused call
// may succeed: on resource_exhausted from a rate limit or a quota, in whole seconds.
const RetryAfterHeader = "Retry-After"

// RetryAfter is the wait the server asked for with err: its Retry-After, in seconds or as an
// HTTP date (a date in the past is no wait). False when err is not a call's error or carries
// none, or an unreadable one. The client's retries honour it (RetryPolicy.MaxRetryAfter); a
// caller that retries on its own should too.
func RetryAfter(err error) (time.Duration, bool) {
	var cerr *connect.Error
	if !errors.As(err, &cerr) {
		return 0, false
	}
	v := strings.TrimSpace(cerr.Meta().Get(RetryAfterHeader))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), 0), true
	}
	return 0, false
}
