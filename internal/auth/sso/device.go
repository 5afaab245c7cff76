package sso

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// deviceGrant is the grant type of a device access token request (RFC 8628 3.4).
const deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

// StartDevice begins a device authorization flow (RFC 8628) at p for clientID: the answer holds
// the device code to poll with and the user code and verification URI to show. A provider
// without a device authorization endpoint gives ErrNotSupported.
func (c *Client) StartDevice(ctx context.Context, p *Provider, clientID, clientSecret string, scopes []string) (*oauth2.DeviceAuthResponse, error) {
	if p.DeviceAuthorizationEndpoint == "" {
		return nil, fmt.Errorf("%w: %s has no device authorization endpoint", ErrNotSupported, p.Issuer)
	}
	var opts []oauth2.AuthCodeOption
	if clientSecret != "" {
		opts = append(opts, oauth2.SetAuthURLParam("client_secret", clientSecret))
	}
	da, err := oauthConfig(p, clientID, clientSecret, "", scopes).DeviceAuth(oidc.ClientContext(ctx, c.http), opts...)
	if err != nil {
		return nil, fmt.Errorf("device authorization at %s: %w", p.Issuer, tokenError(err))
	}
	if da.DeviceCode == "" || da.UserCode == "" || da.VerificationURI == "" {
		return nil, fmt.Errorf("%w: device authorization at %s: incomplete answer", ErrProvider, p.Issuer)
	}
	return da, nil
}

// DeviceStatus is where a device flow stands.
type DeviceStatus int

// The states of a device flow (RFC 8628 3.5).
const (
	// DevicePending: the user has not approved yet; poll again after the interval.
	DevicePending DeviceStatus = iota + 1
	// DeviceSlowDown: pending, and the interval must grow by 5 seconds.
	DeviceSlowDown
	// DeviceExpired: the device code expired; the flow must start again.
	DeviceExpired
	// DeviceDenied: the user refused.
	DeviceDenied
	// DeviceApproved: the user approved; the tokens are in the DevicePoll.
	DeviceApproved
)

// DevicePoll is the answer of one poll of a device flow.
type DevicePoll struct {
	Status DeviceStatus
	// IDToken (still to be checked with VerifyIDToken, with an empty nonce) and AccessToken are
	// set when Status is DeviceApproved.
	IDToken     string
	AccessToken string
}

// PollDevice asks p's token endpoint once whether the user has approved the device flow of
// deviceCode, without waiting: the API polls once per request of its own client, which keeps
// to the interval. oauth2's DeviceAccessToken is not used because it blocks until the flow ends.
func (c *Client) PollDevice(ctx context.Context, p *Provider, clientID, clientSecret, deviceCode string) (DevicePoll, error) {
	if p.TokenEndpoint == "" {
		return DevicePoll{}, fmt.Errorf("%w: %s has no token endpoint", ErrProvider, p.Issuer)
	}
	form := url.Values{"grant_type": {deviceGrant}, "device_code": {deviceCode}}
	cfg := oauthConfig(p, clientID, clientSecret, "", nil)
	if cfg.Endpoint.AuthStyle == oauth2.AuthStyleInParams {
		form.Set("client_id", clientID)
		if clientSecret != "" {
			form.Set("client_secret", clientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return DevicePoll{}, fmt.Errorf("%w: device poll at %s: %w", ErrProvider, p.Issuer, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if cfg.Endpoint.AuthStyle == oauth2.AuthStyleInHeader {
		req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(clientSecret))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return DevicePoll{}, fmt.Errorf("%w: device poll at %s: %w", ErrProvider, p.Issuer, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return DevicePoll{}, fmt.Errorf("%w: device poll at %s: %w", ErrProvider, p.Issuer, err)
	}
	var answer struct {
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
		AccessToken      string `json:"access_token"`
		IDToken          string `json:"id_token"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return DevicePoll{}, fmt.Errorf("%w: device poll at %s: status %d, %w", ErrProvider, p.Issuer, resp.StatusCode, err)
	}
	if resp.StatusCode == http.StatusOK && answer.Error == "" {
		if answer.IDToken == "" {
			return DevicePoll{}, fmt.Errorf("%w: device poll at %s: no id_token in the answer", ErrProvider, p.Issuer)
		}
		return DevicePoll{Status: DeviceApproved, IDToken: answer.IDToken, AccessToken: answer.AccessToken}, nil
	}
	switch answer.Error {
	case "authorization_pending":
		return DevicePoll{Status: DevicePending}, nil
	case "slow_down":
		return DevicePoll{Status: DeviceSlowDown}, nil
	case "expired_token":
		return DevicePoll{Status: DeviceExpired}, nil
	case "access_denied":
		return DevicePoll{Status: DeviceDenied}, nil
	}
	return DevicePoll{}, fmt.Errorf("%w: device poll at %s: status %d, %s %s", ErrRefused, p.Issuer, resp.StatusCode, answer.Error, answer.ErrorDescription)
}
