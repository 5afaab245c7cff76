package metal

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// statusOnly replaces the body of every answer that is not a success (2xx) with its status
// text before gofish reads it: gofish quotes a failed answer's whole body in its error, which
// becomes a machine's reason and goes to the logs, so a BMC (or an internal service posing as
// one) could otherwise have tenants read what it answers. The status code stays, so a 404 is
// still told apart.
type statusOnly struct{ base http.RoundTripper }

// RoundTrip sends req and keeps only the status of a failed answer.
func (s statusOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(req)
	if err != nil || (resp.StatusCode >= 200 && resp.StatusCode < 300) {
		return resp, err
	}
	_ = resp.Body.Close()
	text := http.StatusText(resp.StatusCode)
	if text == "" {
		text = "status " + strconv.Itoa(resp.StatusCode)
	}
	resp.Body = io.NopCloser(strings.NewReader(text))
	resp.ContentLength = int64(len(text))
	resp.Header.Del("Content-Encoding")
	resp.Header.Set("Content-Type", "text/plain")
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the transport underneath.
func (s statusOnly) CloseIdleConnections() {
	if c, ok := s.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
