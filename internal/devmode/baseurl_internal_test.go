package devmode

import "testing"

// TestListenBaseURL: a fixed port gives the origin dev listens at (an unspecified host as
// loopback), port 0 none, since the port is known only once listening.
func TestListenBaseURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		host string
		port int
		want string
	}{
		{"127.0.0.1", 3000, "http://127.0.0.1:3000"},
		{"0.0.0.0", 3000, "http://127.0.0.1:3000"},
		{"::", 8080, "http://127.0.0.1:8080"},
		{"", 8080, "http://127.0.0.1:8080"},
		{"::1", 8080, "http://[::1]:8080"},
		{"compute.local", 443, "http://compute.local:443"},
		{"127.0.0.1", 0, ""},
	} {
		if got := listenBaseURL(c.host, c.port); got != c.want {
			t.Errorf("listenBaseURL(%q, %d) = %q, want %q", c.host, c.port, got, c.want)
		}
	}
}
