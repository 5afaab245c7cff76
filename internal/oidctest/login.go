package oidctest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// loginTimeout bounds each request of a scripted login.
const loginTimeout = 30 * time.Second

// maxRedirects bounds the redirects followed within the provider.
const maxRedirects = 10

// Login signs username in as a browser would: it opens authorizationURL (the relying party's
// redirect to the provider), fills in and submits the provider's login form, and follows the
// provider's redirects until one leaves the provider. It returns that redirect, to the relying
// party's redirect URI with the code and state (or an error parameter), without requesting it.
// A wrong password, or a provider that refuses the request before redirecting, fails the test.
func (p *Provider) Login(t testing.TB, authorizationURL, username, password string) *url.URL {
	t.Helper()
	c := p.browser(t)
	resp, err := c.Get(authorizationURL)
	if err != nil {
		t.Fatalf("oidctest: open the authorization URL: %v", err)
	}
	if to := leaving(resp); to != nil {
		return to
	}
	page := readPage(t, resp)
	form := parseForm(t, resp.Request.URL, page)
	form.fields.Set("username", username)
	form.fields.Set("password", password)
	if form.method != http.MethodPost {
		t.Fatalf("oidctest: the login form's method is %q, not POST:\n%s", form.method, page)
	}
	resp, err = c.PostForm(form.action.String(), form.fields)
	if err != nil {
		t.Fatalf("oidctest: submit the login form: %v", err)
	}
	if to := leaving(resp); to != nil {
		return to
	}
	t.Fatalf("oidctest: the provider did not redirect after the login form (wrong password?): %s", pageText(readPage(t, resp)))
	return nil
}

// browser returns a client with its own cookies that follows redirects within the provider and
// stops at the first that leaves it.
func (p *Provider) browser(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatalf("oidctest: cookie jar: %v", err)
	}
	host := strings.TrimSuffix(strings.TrimPrefix(p.Issuer(), "http://"), "/")
	return &http.Client{
		Jar:     jar,
		Timeout: loginTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != host {
				return http.ErrUseLastResponse
			}
			if len(via) >= maxRedirects {
				return fmt.Errorf("stopped after %d redirects", maxRedirects)
			}
			return nil
		},
	}
}

// leaving returns where resp redirects when it is a redirect the browser did not follow (one
// leaving the provider), and nil otherwise. It closes the body of such a response.
func leaving(resp *http.Response) *url.URL {
	if resp.StatusCode < 300 || resp.StatusCode >= 400 {
		return nil
	}
	loc, err := resp.Location()
	if err != nil {
		return nil
	}
	_ = resp.Body.Close()
	return loc
}

// readPage reads resp's body, failing the test unless it is a 200 response.
func readPage(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("oidctest: read %s: %v", resp.Request.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("oidctest: %s answered %s: %s", resp.Request.URL, resp.Status, b)
	}
	return string(b)
}

// form is an HTML form as a browser would submit it.
type form struct {
	method string
	action *url.URL
	fields url.Values
}

// parseForm returns the first form of page, which was loaded from base, with its inputs' names
// and values.
func parseForm(t testing.TB, base *url.URL, page string) form {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatalf("oidctest: parse %s: %v", base, err)
	}
	var found *html.Node
	for n := range doc.Descendants() {
		if n.Type == html.ElementNode && n.Data == "form" {
			found = n
			break
		}
	}
	if found == nil {
		t.Fatalf("oidctest: no form on %s:\n%s", base, page)
	}
	f := form{method: strings.ToUpper(attr(found, "method")), fields: url.Values{}}
	if f.method == "" {
		f.method = http.MethodGet
	}
	action, err := base.Parse(attr(found, "action"))
	if err != nil {
		t.Fatalf("oidctest: the form's action on %s: %v", base, err)
	}
	f.action = action
	for n := range found.Descendants() {
		if n.Type == html.ElementNode && n.Data == "input" && attr(n, "name") != "" {
			f.fields.Set(attr(n, "name"), attr(n, "value"))
		}
	}
	return f
}

// attr is the value of n's attribute key, "" when it has none.
func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// pageText is the visible text of an HTML page, for failure messages.
func pageText(page string) string {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return page
	}
	var words []string
	for n := range doc.Descendants() {
		if n.Type == html.TextNode && n.Parent != nil && n.Parent.Data != "style" && n.Parent.Data != "script" {
			words = append(words, strings.Fields(n.Data)...)
		}
	}
	return strings.Join(words, " ")
}
