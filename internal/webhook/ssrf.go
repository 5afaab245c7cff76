package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// A webhook URL is chosen by a tenant and called from inside the deployment, so unless the
// deployment allows private addresses it must not lead into the deployment's own network (server
// side request forgery): CheckURL refuses URLs that name such an address, and NewClient's dialer
// refuses to connect to one after DNS resolution, so a name that resolves (or later rebinds) to
// one is refused too.

// MaxURLLength is the longest webhook URL accepted.
const MaxURLLength = 2048

// ErrPrivateAddress is returned when a webhook would reach a non-public address.
var ErrPrivateAddress = errors.New("loopback, link-local, private, unspecified, multicast and reserved addresses are not allowed (see webhooks.allowPrivate)")

// extraBlocked are ranges that netip's predicates do not cover but that are not the public
// internet either.
var extraBlocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // carrier-grade NAT, some clouds' metadata services
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("100::/64"),       // discard-only
}

// nat64 embeds IPv4 addresses in its last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// PrivateAddr reports whether ip is not a public unicast address: loopback, link-local, private,
// unspecified, multicast, or reserved; IPv4 addresses embedded in IPv6 are judged as IPv4.
func PrivateAddr(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte(b[12:]))
	}
	if !ip.IsValid() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsPrivate() || ip.IsUnspecified() {
		return true
	}
	for _, p := range extraBlocked {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// numericHost matches hosts that resolvers may read as IPv4 addresses in inet_aton's shorthand
// forms ("127.1", "2130706433", "0x7f.0.0.1"); no DNS name has an all-numeric last label.
var numericHost = regexp.MustCompile(`(?i)^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}\.?$`)

// CheckURL validates a webhook URL: http or https, a host, no credentials, at most
// MaxURLLength; and unless allowPrivate, a host that is neither localhost nor a literal address
// that PrivateAddr refuses. Names are not resolved here: the dialer checks every address it
// connects to.
func CheckURL(raw string, allowPrivate bool) error {
	if raw == "" {
		return errors.New("required")
	}
	if len(raw) > MaxURLLength {
		return fmt.Errorf("must be at most %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("must be an http or https URL")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return errors.New("must name a host")
	}
	if u.User != nil {
		return errors.New("must not contain credentials; deliveries are authenticated by their signature")
	}
	if allowPrivate {
		return nil
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return fmt.Errorf("must not name localhost: %w", ErrPrivateAddress)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if PrivateAddr(ip) {
			return fmt.Errorf("must not name %s: %w", ip, ErrPrivateAddress)
		}
		return nil
	}
	if numericHost.MatchString(host) {
		return errors.New("must name a host or a plain IP address")
	}
	return nil
}

// refusePrivate is a net.Dialer Control function: it runs after name resolution, on the address
// about to be connected to.
func refusePrivate(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("webhook address %q: %w", address, ErrPrivateAddress)
	}
	if PrivateAddr(ap.Addr()) {
		return fmt.Errorf("webhook address %s: %w", ap.Addr(), ErrPrivateAddress)
	}
	return nil
}

// NewClient returns the HTTP client webhooks are sent with: no proxy from the environment, no
// redirects followed (a 3xx answer is a failed delivery, as the specification says), up to
// conns idle connections per host, and unless allowPrivate a dialer that refuses non-public
// addresses after DNS resolution.
func NewClient(allowPrivate bool, conns int) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		dialer.Control = refusePrivate
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          max(100, conns*4),
			MaxIdleConnsPerHost:   max(2, conns),
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
