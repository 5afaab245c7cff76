package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/dashboard"
)

func TestServesTheBuiltApp(t *testing.T) {
	mux := http.NewServeMux()
	dashboard.Mount(mux, "/dashboard")
	srv := httptest.NewServer(mux)
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	res, err := noRedirect.Get(srv.URL + "/dashboard")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/dashboard/" {
		t.Errorf("GET /dashboard: %d to %q, want a redirect to /dashboard/", res.StatusCode, res.Header.Get("Location"))
	}

	get := func(path string) (*http.Response, string) {
		t.Helper()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, page := get("/dashboard/")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /dashboard/: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	if !strings.Contains(res.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("index.html without the content security policy: %q", res.Header.Get("Content-Security-Policy"))
	}
	assets := regexp.MustCompile(`(?:src|href)="\./(assets/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(assets) < 2 {
		t.Fatalf("index.html links %d assets, want the script and the stylesheet:\n%s", len(assets), page)
	}
	for _, a := range assets {
		res, body := get("/dashboard/" + a[1])
		if res.StatusCode != 200 || len(body) == 0 || !strings.Contains(res.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s: %d, %d bytes, Cache-Control %q", a[1], res.StatusCode, len(body), res.Header.Get("Cache-Control"))
		}
	}
	if res, _ := get("/dashboard/nope.js"); res.StatusCode != http.StatusNotFound {
		t.Errorf("GET an unknown file: %d, want 404", res.StatusCode)
	}
}
