package metal

import (
	"io"
	"net/http"
	"strconv"
	"strings"
)

// statusOnly replaces the body of every answer that is not a success (2xx) with the request
// and the status text ("POST /redfish/v1/Systems/1/Actions/ComputerSystem.Reset: Internal
// Server Error", the path cut at maxPathInError) before gofish reads it: gofish quotes a failed answer's whole body in its error, which
// becomes a machine's reason and goes to the logs, so a BMC (or an internal service posing as
// one) could otherwise have tenants read what it answers. The status code stays, so a 404 is
// still told apart.
type statusOnly struct{ base http.RoundTripper }

// maxPathInError bounds the request path quoted in a failure.
const maxPathInError = 200

// RoundTrip sends req and keeps only the status of a failed answer.
func (s statusOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(req)
	if err != nil || (resp.StatusCode >= 200 && resp.StatusCode < 300) {
		return resp, err
	}
	_ = resp.Body.Close()
	status := http.StatusText(resp.StatusCode)
	if status == "" {
		status = "status " + strconv.Itoa(resp.StatusCode)
	}
	path := req.URL.EscapedPath()
	if len(path) > maxPathInError {
		path = path[:maxPathInError] + "…"
	}
	text := req.Method + " " + path + ": " + status
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
