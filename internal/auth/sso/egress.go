package sso

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/better-compute/better-compute/internal/limit"
	"github.com/better-compute/better-compute/internal/webhook"
)

// MaxResponseBytes bounds every answer read from an identity provider (discovery documents, key
// sets, token and userinfo answers), so a hostile provider cannot exhaust memory.
const MaxResponseBytes = 1 << 20

// errTooLarge is returned by a response body that goes past MaxResponseBytes.
var errTooLarge = fmt.Errorf("identity provider answer larger than %d bytes", MaxResponseBytes)

// egressClient returns a copy of base (webhook.NewClient's client when nil) whose requests are
// refused unless webhook.CheckURL accepts their URL, whose answers are cut at MaxResponseBytes,
// and whose requests time out after timeout.
func egressClient(base *http.Client, allowPrivate bool, timeout time.Duration) *http.Client {
	if base == nil {
		base = webhook.NewClient(allowPrivate, 4)
	}
	c := *base
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	c.Transport = &guardTransport{base: rt, allowPrivate: allowPrivate}
	if c.Timeout == 0 || c.Timeout > timeout {
		c.Timeout = timeout
	}
	return &c
}

// guardTransport checks each request's URL and limits each answer's size.
type guardTransport struct {
	base         http.RoundTripper
	allowPrivate bool
}

// RoundTrip refuses URLs that webhook.CheckURL refuses, then limits the answer's body.
func (g *guardTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := webhook.CheckURL(req.URL.String(), g.allowPrivate); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("identity provider URL %s://%s%s: %w", req.URL.Scheme, req.URL.Host, req.URL.Path, err)
	}
	resp, err := g.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = limit.Answer(resp.Body, MaxResponseBytes, errTooLarge)
	return resp, nil
}

// getJSON fetches url with hc and decodes a 200 answer's JSON body into v; a bearer token is sent
// when given.
func getJSON(ctx context.Context, hc *http.Client, url, bearer string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("request %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: status %d", url, resp.StatusCode)
	}
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "application/jwt" {
		return fmt.Errorf("get %s: signed (application/jwt) answers are not supported", url)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", url, err)
	}
	return nil
}
