package oidctest

import (
	"net/http"
	"strings"
	"testing"
)

// approveLink is where the provider's confirmation page's Allow button goes, relative to the page.
const approveLink = "./confirm?action=allowed"

// approved is what the provider answers once the user has approved a device.
const approved = "Device authorization allowed"

// ApproveDevice plays the user's part of a device flow (started with DeviceClientID) as a browser
// would: it opens verificationURI, enters userCode, signs username in with password and allows
// the device. The device's next poll then gets its tokens, whose subject is username; the
// provider fails that poll unless username is also the user's ID (see the package's doc). A wrong
// code or password, or a page that is not what the provider shows, fails the test.
func (p *Provider) ApproveDevice(t testing.TB, verificationURI, userCode, username, password string) {
	t.Helper()
	c := p.browser(t)
	resp, err := c.Get(verificationURI)
	if err != nil {
		t.Fatalf("oidctest: open the verification URI: %v", err)
	}
	codeForm := parseForm(t, resp.Request.URL, readPage(t, resp))
	codeForm.fields.Set("user_code", userCode)
	resp, err = c.PostForm(codeForm.action.String(), codeForm.fields)
	if err != nil {
		t.Fatalf("oidctest: submit the user code: %v", err)
	}
	loginForm := parseForm(t, resp.Request.URL, readPage(t, resp))
	if loginForm.method != http.MethodPost {
		t.Fatalf("oidctest: the device login form's method is %q, not POST", loginForm.method)
	}
	loginForm.fields.Set("username", username)
	loginForm.fields.Set("password", password)
	resp, err = c.PostForm(loginForm.action.String(), loginForm.fields)
	if err != nil {
		t.Fatalf("oidctest: submit the device login form: %v", err)
	}
	// A refused code or password redirects back to the code's page, with the reason.
	confirm := readPage(t, resp)
	if !strings.Contains(confirm, approveLink) {
		t.Fatalf("oidctest: the provider did not ask to confirm the device (wrong code or password?): %s", pageText(confirm))
	}
	allow, err := resp.Request.URL.Parse(approveLink)
	if err != nil {
		t.Fatalf("oidctest: the Allow button's link: %v", err)
	}
	resp, err = c.Get(allow.String())
	if err != nil {
		t.Fatalf("oidctest: allow the device: %v", err)
	}
	if page := readPage(t, resp); !strings.Contains(page, approved) {
		t.Fatalf("oidctest: the provider did not approve the device: %s", pageText(page))
	}
}
