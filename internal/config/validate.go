package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// MinSecretLength is the fewest characters a deployment secret may have.
const MinSecretLength = 32

var (
	basePathPattern = regexp.MustCompile(`^(/[A-Za-z0-9_-]+)+$`)
	regionPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// Validate checks c as Load does, for configurations changed after loading (by flags, say). It
// returns an *Error listing every problem, or nil.
func (c *Config) Validate() error {
	if ps := c.problems(); len(ps) > 0 {
		return &Error{Problems: ps.scrub(c.Secret, databasePassword(c.Database.URL))}
	}
	return nil
}

// problems checks every key and returns what is wrong, in the order of the struct.
func (c *Config) problems() problems {
	var ps problems
	switch {
	case c.Secret == "":
		ps.add("secret", "required (set %s)", envName("secret"))
	case utf8.RuneCountInString(c.Secret) < MinSecretLength:
		ps.add("secret", "must be at least %d characters", MinSecretLength)
	}
	if c.BaseURL != "" {
		if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			ps.add("baseURL", "must be an absolute http or https URL like https://compute.example.com, got %q", c.BaseURL)
		}
	}
	if !basePathPattern.MatchString(c.BasePath) {
		ps.add("basePath", "must start with /, have no trailing slash and use only letters, digits, _, - and / (like /api), got %q", c.BasePath)
	}
	if msg := checkDatabaseURL(c.Database.URL); msg != "" {
		ps.add("database.url", "not a PostgreSQL URL (postgres://user:password@host:port/database) or key=value connection string: %s", msg)
	}
	for key, n := range map[string]int{
		"database.maxConns": c.Database.MaxConns, "database.gatewayMaxConns": c.Database.GatewayMaxConns,
		"database.workersMaxConns": c.Database.WorkersMaxConns, "database.notifierMaxConns": c.Database.NotifierMaxConns,
	} {
		if n < 0 {
			ps.add(key, "must be 0 (the default) or more, got %d", n)
		}
	}
	if !validHost(c.Host) {
		ps.add("host", "must be an IP address or host name, got %q", c.Host)
	}
	if c.Port < 0 || c.Port > 65535 {
		ps.add("port", "must be from 0 to 65535, got %d", c.Port)
	}
	c.checkRoles(&ps)
	for key, d := range map[string]time.Duration{
		"retention.outbox": c.Retention.Outbox, "retention.commands": c.Retention.Commands, "retention.audit": c.Retention.Audit,
		"retention.tunnels": c.Retention.Tunnels, "retention.gpuHealth": c.Retention.GPUHealth,
		"retention.gpuUsage": c.Retention.GPUUsage,
	} {
		if d <= 0 {
			ps.add(key, "must be a positive duration, got %s", d)
		}
	}
	c.checkModules(&ps)
	c.checkGateway(&ps)
	c.checkCORS(&ps)
	if c.TrustDomain != "" && (!isDNSName(c.TrustDomain) || strings.ToLower(c.TrustDomain) != c.TrustDomain) {
		ps.add("trustDomain", "must be a lower-case DNS name like example.com, got %q", c.TrustDomain)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		ps.add("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		ps.add("log.format", "must be json or text, got %q", c.Log.Format)
	}
	c.checkObservability(&ps)
	c.checkLimits(&ps)
	c.checkRateLimits(&ps)
	c.checkWebhookRetry(&ps)
	c.checkAuth(&ps)
	c.checkTunnels(&ps)
	return ps
}

func (c *Config) checkRoles(ps *problems) {
	roles := splitList(c.Roles)
	if len(roles) == 0 {
		ps.add("roles", "required: %s or a comma-separated list of %s", RoleAll, strings.Join(Roles(), ", "))
	}
	for _, r := range roles {
		switch {
		case r == RoleAll && len(roles) > 1:
			ps.add("roles", "%s cannot be combined with other roles", RoleAll)
		case r == RoleAll:
		case !slices.Contains(Roles(), r):
			ps.add("roles", "unknown role %q (want %s or a comma-separated list of %s)", r, RoleAll, strings.Join(Roles(), ", "))
		case r == RoleGateway && c.Gateway.Listen == "":
			ps.add("gateway.listen", "required when roles include %s (set %s)", RoleGateway, envName("gateway.listen"))
		}
	}
}

func (c *Config) checkGateway(ps *problems) {
	g := c.Gateway
	if !regionPattern.MatchString(g.Region) {
		ps.add("gateway.region", "must be 1 to 63 letters, digits, ., _ or -, starting with a letter or digit, got %q", g.Region)
	}
	if g.PublicEndpoint != "" {
		if msg := checkHostPort(g.PublicEndpoint, true); msg != "" {
			ps.add("gateway.publicEndpoint", "%s", msg)
		}
	}
	if g.Listen == "" {
		return
	}
	if msg := checkHostPort(g.Listen, false); msg != "" {
		ps.add("gateway.listen", "%s", msg)
	}
	switch {
	case g.ControlListen == "":
		ps.add("gateway.controlListen", "required when gateway.listen is set")
	case g.ControlListen == g.Listen:
		ps.add("gateway.controlListen", "must differ from gateway.listen")
	default:
		if msg := checkHostPort(g.ControlListen, false); msg != "" {
			ps.add("gateway.controlListen", "%s", msg)
		}
	}
	c.checkGatewayWebSocket(ps)
}

// maxWebSocketPath bounds gateway.websocket.path.
const maxWebSocketPath = 256

func (c *Config) checkGatewayWebSocket(ps *problems) {
	w := c.Gateway.WebSocket
	if !w.Enabled {
		return
	}
	if msg := checkHostPort(w.Listen, false); msg != "" {
		ps.add("gateway.websocket.listen", "%s", msg)
	} else if w.Listen == c.Gateway.Listen || w.Listen == c.Gateway.ControlListen {
		ps.add("gateway.websocket.listen", "must differ from gateway.listen and gateway.controlListen")
	}
	if !strings.HasPrefix(w.Path, "/") || len(w.Path) > maxWebSocketPath || strings.ContainsAny(w.Path, " {}?#") {
		ps.add("gateway.websocket.path", "must be an absolute path of at most %d characters without spaces, braces, ? or #, got %q", maxWebSocketPath, w.Path)
	}
	switch {
	case (w.CertFile == "") != (w.KeyFile == ""):
		ps.add("gateway.websocket.certFile", "certFile and keyFile go together")
	case w.Plain && w.CertFile != "":
		ps.add("gateway.websocket.certFile", "a plain listener serves no TLS: drop certFile and keyFile, or plain")
	}
}

func (c *Config) checkObservability(ps *problems) {
	if l := c.Metrics.Listen; l != "" {
		if msg := checkHostPort(l, false); msg != "" {
			ps.add("metrics.listen", "%s", msg)
		} else if c.Gateway.Listen != "" && (l == c.Gateway.Listen || l == c.Gateway.ControlListen) {
			ps.add("metrics.listen", "must differ from gateway.listen and gateway.controlListen")
		}
	}
	if e := c.Otel.Endpoint; e != "" {
		if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			ps.add("otel.endpoint", "must be an absolute http or https URL of an OTLP/HTTP collector, like http://otel-collector:4318")
		} else if u.User != nil {
			ps.add("otel.endpoint", "must not hold credentials; send them as headers with OTEL_EXPORTER_OTLP_HEADERS")
		}
	}
	if r := c.Otel.SampleRatio; !(r >= 0 && r <= 1) {
		ps.add("otel.sampleRatio", "must be from 0 to 1, got %v", r)
	}
}

func (c *Config) checkCORS(ps *problems) {
	for i, o := range c.CORS.AllowedOrigins {
		if o != "*" && !isOrigin(o) {
			ps.add(fmt.Sprintf("cors.allowedOrigins[%d]", i), `must be "*" or an origin scheme://host[:port] with no path, like https://app.example.com, got %q`, o)
		}
	}
	if c.CORS.AllowCredentials && slices.Contains(c.CORS.AllowedOrigins, "*") {
		ps.add("cors.allowCredentials", `cannot be true when cors.allowedOrigins contains "*"; list the origins instead`)
	}
}

// isOrigin reports whether s is a browser origin: scheme://host[:port] and nothing more.
func isOrigin(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Opaque == "" && u.User == nil && validHost(u.Hostname()) &&
		u.Path == "" && u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && !strings.HasSuffix(s, ":")
}

// checkHostPort says what is wrong with a host:port address, or "" when nothing is. The host may
// be empty (all interfaces) unless needHost.
func checkHostPort(s string, needHost bool) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("must be host:port (like :8443 or gw.example.com:443), got %q", s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("port must be a number from 0 to 65535, got %q", s)
	}
	if (host != "" || needHost) && !validHost(host) {
		return fmt.Sprintf("host must be an IP address or host name, got %q", s)
	}
	return ""
}

// validHost reports whether s is an IP address or a DNS host name.
func validHost(s string) bool {
	return net.ParseIP(s) != nil || isDNSName(s)
}

// isDNSName reports whether s is a DNS name: dot-separated labels of letters, digits and
// hyphens, no label starting or ending with a hyphen.
func isDNSName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if r != '-' && !isASCIILetter(r) && (r < '0' || r > '9') {
				return false
			}
		}
	}
	return true
}

// checkDatabaseURL says why pgconn rejects a connection string, without quoting it, or "" when it
// does not. pgconn redacts the password only from strings it can parse, and its message for a
// malformed URL can hold part of the password, so that case gets no detail.
func checkDatabaseURL(s string) string {
	if s == "" {
		return ""
	}
	if isURL(s) {
		if _, err := url.Parse(s); err != nil {
			return "malformed URL"
		}
	}
	_, err := pgconn.ParseConfig(s)
	if err == nil {
		return ""
	}
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) {
		return "cannot parse"
	}
	pce.ConnString = "" // the error is ours alone; drop the string before printing
	return strings.TrimPrefix(pce.Error(), "cannot parse ``: ")
}

// isURL reports whether pgconn reads s as a URL rather than key=value pairs.
func isURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}
