package provision

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/internal/limit"
	"github.com/better-compute/better-compute/internal/webhook"
)

// A provider's endpoints (Redfish service roots, an EC2 endpoint) are chosen by a tenant admin
// and called from inside the deployment, like webhooks and identity providers: unless the
// deployment allows private endpoints, they must not lead into the deployment's own network
// (server side request forgery). Egress applies the webhooks' checks to them: CheckEndpoint
// refuses URLs that name a private address when a class is made, and Client's dialer refuses to
// connect to one after DNS resolution, so a name that resolves (or later rebinds) to one is
// refused too. Client follows no redirect and bounds every answer.

// ErrPrivateEndpoint is wrapped by the errors of endpoints and connections that would reach a
// non-public address the deployment does not allow.
var ErrPrivateEndpoint = errors.New("loopback, link-local, private, unspecified, multicast and reserved addresses are not allowed (see provision.allowPrivateEndpoints)")

// ErrAnswerTooLarge is returned by the body of an answer that goes past Client's bound.
var ErrAnswerTooLarge = errors.New("the provider's answer is larger than the limit")

// Egress is how providers reach their endpoints: the deployment's policy for the addresses
// they may connect to. Its zero value refuses every non-public address.
type Egress struct {
	// AllowPrivate lets endpoints be (or resolve to) loopback, link-local, private and other
	// non-public addresses: a deployment whose BMCs or EC2 endpoint live on its own network
	// (config provision.allowPrivateEndpoints).
	AllowPrivate bool
}

// CheckEndpoint validates an endpoint URL as webhook.CheckURL does (http or https, a host, no
// credentials, at most webhook.MaxURLLength) and, unless AllowPrivate, refuses localhost and
// literal addresses that webhook.PrivateAddr refuses. Names are not resolved: Client's dialer
// checks each address it connects to.
func (e Egress) CheckEndpoint(raw string) error {
	err := webhook.CheckURL(raw, e.AllowPrivate)
	if errors.Is(err, webhook.ErrPrivateAddress) {
		return fmt.Errorf("must not name a loopback or private address: %w", ErrPrivateEndpoint)
	}
	return err
}

// ClientOptions shape a provider's HTTP client.
type ClientOptions struct {
	// Timeout bounds each request, answer included; none when zero.
	Timeout time.Duration
	// TLS is the TLS configuration (nil for the default).
	TLS *tls.Config
	// MaxAnswerBytes bounds each answer's body: reading past it fails with ErrAnswerTooLarge.
	MaxAnswerBytes int64
}

// Client returns the HTTP client a provider calls its endpoints with: no proxy from the
// environment (the address checked must be the endpoint's), no redirects (a 3xx answer is
// returned as it is, for the provider to fail on), each answer's body bounded by
// opts.MaxAnswerBytes, and unless AllowPrivate a dialer that refuses non-public addresses after
// DNS resolution.
func (e Egress) Client(opts ClientOptions) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !e.AllowPrivate {
		dialer.Control = refusePrivate
	}
	var rt http.RoundTripper = &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       opts.TLS,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if opts.MaxAnswerBytes > 0 {
		rt = boundedTransport{base: rt, limit: opts.MaxAnswerBytes}
	}
	return &http.Client{
		Transport:     rt,
		Timeout:       opts.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// refusePrivate is a net.Dialer Control function: it runs after name resolution, on the address
// about to be connected to.
func refusePrivate(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("provider address %q: %w", address, ErrPrivateEndpoint)
	}
	if webhook.PrivateAddr(ap.Addr()) {
		return fmt.Errorf("provider address %s: %w", ap.Addr(), ErrPrivateEndpoint)
	}
	return nil
}

// boundedTransport bounds the body of each answer.
type boundedTransport struct {
	base  http.RoundTripper
	limit int64
}

// RoundTrip sends req and bounds its answer's body.
func (b boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = limit.Answer(resp.Body, b.limit, ErrAnswerTooLarge)
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the transport underneath, so that
// http.Client.CloseIdleConnections reaches them.
func (b boundedTransport) CloseIdleConnections() {
	if c, ok := b.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
