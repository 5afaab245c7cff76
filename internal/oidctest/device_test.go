package oidctest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// deviceToken asks p's token endpoint once for the tokens of deviceCode, as a device polls, and
// returns the answer's error code ("" on success) and ID token.
func deviceToken(t *testing.T, p *Provider, tokenURL, deviceCode string) (errCode, idToken string) {
	t.Helper()
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {deviceCode}}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(p.DeviceClientID(), p.DeviceClientSecret())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("poll the token endpoint: %v", err)
	}
	defer resp.Body.Close()
	var answer struct {
		Error   string `json:"error"`
		IDToken string `json:"id_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("poll the token endpoint: %s: %v", resp.Status, err)
	}
	return answer.Error, answer.IDToken
}

func TestDeviceFlowSignsIn(t *testing.T) {
	t.Parallel()
	// The device flow's subject is the username, and the provider then finds the user by it as
	// an ID: only a user whose ID is their username can approve.
	dave := User{ID: "dave", Username: "dave", Password: "dave-pw", FirstName: "Dave", LastName: "Device", Email: "dave@example.com"}
	p := Start(t, Options{Device: true, Users: []User{DefaultUser, dave}})
	provider, err := oidc.NewProvider(t.Context(), p.Issuer())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	cfg := oauth2.Config{
		ClientID: p.DeviceClientID(), ClientSecret: p.DeviceClientSecret(),
		Endpoint: provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "profile", "email"},
	}
	cfg.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	da, err := cfg.DeviceAuth(t.Context())
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	if code, _ := deviceToken(t, p, cfg.Endpoint.TokenURL, da.DeviceCode); code != "authorization_pending" {
		t.Fatalf("poll before approval: %q, want authorization_pending", code)
	}
	p.ApproveDevice(t, da.VerificationURI, da.UserCode, dave.Username, dave.Password)
	code, raw := deviceToken(t, p, cfg.Endpoint.TokenURL, da.DeviceCode)
	if code != "" || raw == "" {
		t.Fatalf("poll after approval: error %q, id_token %q\n%s", code, raw, p.Log())
	}
	id, err := provider.VerifierContext(t.Context(), &oidc.Config{ClientID: p.DeviceClientID()}).Verify(t.Context(), raw)
	if err != nil {
		t.Fatalf("verify the ID token: %v", err)
	}
	if id.Subject != dave.Username {
		t.Fatalf("the device's ID token has subject %q, want the username %q", id.Subject, dave.Username)
	}
}

func TestDeviceFlowNeedsTheDeviceProvider(t *testing.T) {
	t.Parallel()
	p := Start(t, Options{RedirectURIs: []string{redirectURI}})
	provider, err := oidc.NewProvider(t.Context(), p.Issuer())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	cfg := oauth2.Config{ClientID: p.DeviceClientID(), ClientSecret: p.DeviceClientSecret(), Endpoint: provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID}}
	cfg.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	if _, err := cfg.DeviceAuth(t.Context()); err == nil {
		t.Fatal("the example server accepted a device authorization for the client only deviceop has")
	}
}
