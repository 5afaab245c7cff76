// Package config is the deployment configuration that every better-compute process starts from.
//
// A configuration comes from three layers, later ones winning: the defaults ([Default]), one YAML
// file (better-compute.yaml) whose string values may use ${NAME} and ${NAME:-default}
// interpolation, and BETTER_COMPUTE_* environment variables, one for every key ([EnvVars]).
// [Load] checks the result and reports every problem at once, each naming its key, so an
// operator can fix a configuration in one pass. The secret and the database password never
// appear in errors, in fmt output or in slog output of a [Config].
package config

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/internal/wsnet"
)

// Role names, as accepted by roles and BETTER_COMPUTE_ROLES.
const (
	// RoleAll runs the API, every worker role, and the gateway when gateway.listen is set.
	RoleAll = "all"
	// RoleAPI serves the Connect API, health endpoints and tunnel upgrades.
	RoleAPI = "api"
	// RoleGateway serves daemon sessions and the internal control API.
	RoleGateway = "gateway"
	// RoleControllers runs every reconciler not declared for the scheduler.
	RoleControllers = "controllers"
	// RoleScheduler runs the placer and the other scheduler reconcilers.
	RoleScheduler = "scheduler"
	// RoleSinks delivers the outbox to event sinks.
	RoleSinks = "sinks"
	// RoleIAM runs IAM background jobs.
	RoleIAM = "iam"
)

// Roles returns every role a process can run, in a stable order (all excluded).
func Roles() []string {
	return []string{RoleAPI, RoleGateway, RoleControllers, RoleScheduler, RoleSinks, RoleIAM}
}

// Config is one deployment's configuration. The yaml tags are the file's keys; each key is also
// settable through the environment variable that [EnvVars] lists for it.
type Config struct {
	// Secret is the deployment secret that seals the PKI and derives other keys. Required, at
	// least 32 characters; it is never printed (see Redacted).
	Secret string `yaml:"secret"`
	// BaseURL is the public URL callers reach the API at, for links and discovery. Optional;
	// when set it is an absolute http or https URL.
	BaseURL string `yaml:"baseURL"`
	// BasePath prefixes every API route, {basePath}/{group}/{method}. Starts with / and has no
	// trailing slash; default /api.
	BasePath string `yaml:"basePath"`
	// Database says where the PostgreSQL database is.
	Database Database `yaml:"database"`
	// Host is the address the API listens on; default 0.0.0.0.
	Host string `yaml:"host"`
	// Port is the port the API listens on, 0 to 65535 (0 picks a free port); default 3000.
	Port int `yaml:"port"`
	// Roles is "all" or a comma-separated list of roles (see Roles) this process runs; see
	// RoleSet for what "all" expands to.
	Roles string `yaml:"roles"`
	// Modules are the optional modules to enable, each a name or {name, config}. Default none.
	Modules []ModuleConfig `yaml:"modules"`
	// Gateway configures the daemon gateway; it runs only when Gateway.Listen is set.
	Gateway Gateway `yaml:"gateway"`
	// CORS says which browser origins may call the API.
	CORS CORS `yaml:"cors"`
	// TrustDomain is the SPIFFE trust domain of machine identities, a lower-case DNS name like
	// example.com. Optional until the PKI is initialised.
	TrustDomain string `yaml:"trustDomain"`
	// Log configures the process log.
	Log Log `yaml:"log"`
	// Metrics configures the Prometheus metrics.
	Metrics Metrics `yaml:"metrics"`
	// Otel configures OpenTelemetry tracing.
	Otel Otel `yaml:"otel"`

	// Webhooks configure tenants' webhooks.
	Webhooks Webhooks `yaml:"webhooks"`

	// Auth configures sign-in through identity providers (see auth.go).
	Auth Auth `yaml:"auth"`

	// Retention says how long finished work is kept.
	Retention Retention `yaml:"retention"`

	// Limits bound requests, connections and daemon messages (see limits.go).
	Limits Limits `yaml:"limits"`

	// RateLimits bound call rates and what each tenant may create (see ratelimits.go).
	RateLimits RateLimits `yaml:"rateLimits"`

	// Tunnels bound the tunnels the API relays (see tunnels.go).
	Tunnels Tunnels `yaml:"tunnels"`
}

// Database says where the PostgreSQL database is.
type Database struct {
	// URL is a PostgreSQL URL (postgres://user:password@host:port/db) or key=value connection
	// string. Empty is allowed at load, for dev mode; RequireDatabase insists on it.
	URL string `yaml:"url"`
	// MaxConns caps the connections of the process's main pool: the API's requests, and
	// start-up and migrations. 0, the default, takes pool_max_conns from the URL, or else
	// database.DefaultMaxConns (16): pgx's own default of four on a small machine made every
	// role queue behind the others.
	MaxConns int `yaml:"maxConns"`
	// GatewayMaxConns caps the gateway role's own pool (dispatch, liveness, the sessions' acks
	// and results), apart from the API's so that a surge of API calls cannot starve command
	// delivery. 0, the default, means 8.
	GatewayMaxConns int `yaml:"gatewayMaxConns"`
	// WorkersMaxConns caps the worker roles' own pool (jobs, reconcilers, sinks, their locks).
	// 0, the default, means 8.
	WorkersMaxConns int `yaml:"workersMaxConns"`
	// NotifierMaxConns caps the notifier's own pool, with which the API finds the gateways to
	// poke after a commit; kept apart so the pokes never wait behind the requests that caused
	// them. 0, the default, means 2.
	NotifierMaxConns int `yaml:"notifierMaxConns"`
}

// Webhooks configure the webhooks tenants register for their events.
type Webhooks struct {
	// AllowPrivate lets webhook URLs point at loopback, link-local and private addresses.
	// Off by default, so a tenant cannot make the control plane call into its own network.
	AllowPrivate bool `yaml:"allowPrivate"`
	// Retry bounds how long failed deliveries are retried before a webhook is marked failing
	// and its events are parked (see webhooks.go).
	Retry WebhookRetry `yaml:"retry"`
}

// Retention says how long finished work is kept before the retention job prunes it.
type Retention struct {
	// Outbox keeps delivered events this long (default 168h).
	Outbox time.Duration `yaml:"outbox"`
	// Commands keeps finished node commands this long (default 720h).
	Commands time.Duration `yaml:"commands"`
	// Audit keeps audit rows this long (default 8760h, a year).
	Audit time.Duration `yaml:"audit"`
	// Tunnels keeps closed tunnels, and tickets never used, this long after they closed or
	// expired (default 720h).
	Tunnels time.Duration `yaml:"tunnels"`
	// GPUHealth keeps the history of GPUs' health changes this long (default 2160h, 90 days).
	GPUHealth time.Duration `yaml:"gpuHealth"`
	// GPUUsage keeps the per-lease GPU utilisation minutes this long (default 2160h, 90 days).
	GPUUsage time.Duration `yaml:"gpuUsage"`
}

// Gateway configures the daemon gateway.
type Gateway struct {
	// Listen is the host:port daemons connect to (mTLS). Empty means this deployment's processes
	// run no gateway.
	Listen string `yaml:"listen"`
	// Region names the gateway's region; it becomes part of gateway SPIFFE IDs. Default "default".
	Region string `yaml:"region"`
	// ControlListen is the host:port of the internal control API; default :8444. Used only when
	// Listen is set.
	ControlListen string `yaml:"controlListen"`
	// PublicEndpoint is the host:port daemons are told to dial (e.g. gw.example.com:443), when it
	// differs from Listen. Optional.
	PublicEndpoint string `yaml:"publicEndpoint"`
	// WebSocket is the daemons' way in through HTTP proxies. Used only when Listen is set.
	WebSocket GatewayWebSocket `yaml:"websocket"`
}

// GatewayWebSocket configures the gateway's WebSocket listener: daemons whose direct path is
// blocked (an HTTP proxy, a TLS-inspecting middlebox) carry their own TLS session, and so their
// identity, inside a WebSocket to it (bcd run --transport websocket|auto).
type GatewayWebSocket struct {
	// Enabled turns the listener on. Default false.
	Enabled bool `yaml:"enabled"`
	// Listen is its host:port. Default :443.
	Listen string `yaml:"listen"`
	// Path is where upgrades are accepted. Default /bettercompute.daemon.v1/websocket.
	Path string `yaml:"path"`
	// Plain serves plain HTTP, for a load balancer or reverse proxy in front that terminates TLS
	// and proxies the WebSocket. Default false: the listener serves TLS itself.
	Plain bool `yaml:"plain"`
	// CertFile and KeyFile are the outer TLS certificate (PEM), for example one that public CAs
	// sign; by default the gateway's own serving certificate, which daemons trust through the
	// deployment's root.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// CORS says which browser origins may call the API.
type CORS struct {
	// AllowedOrigins lists origins (scheme://host[:port], no path) or "*" for any. Default none.
	AllowedOrigins []string `yaml:"allowedOrigins"`
	// AllowCredentials lets browsers send cookies and credentials cross-origin. It cannot be
	// combined with "*". Default false.
	AllowCredentials bool `yaml:"allowCredentials"`
}

// Log configures the process log.
type Log struct {
	// Level is the lowest level logged: debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is json or text. Default json.
	Format string `yaml:"format"`
}

// Metrics configures the Prometheus metrics. A process serves them at GET /metrics on Listen
// when it is set, else (with the api role) on the API's port.
type Metrics struct {
	// Listen is the host:port (like :9090) where the process serves GET /metrics, keeping them
	// off the API's port. Empty means no metrics listener: only the api role serves them.
	Listen string `yaml:"listen"`
}

// Otel configures OpenTelemetry tracing, exported over OTLP/HTTP.
type Otel struct {
	// Endpoint is the OTLP/HTTP collector URL, like http://otel-collector:4318 (/v1/traces is
	// appended when the URL has no path). Empty, the default, turns tracing off.
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the share of new traces recorded, from 0 to 1 (default 1); a span whose
	// caller's trace was sampled is always recorded.
	SampleRatio float64 `yaml:"sampleRatio"`
}

// Default returns the configuration used when neither the file nor the environment sets a key.
// It has no secret, so it does not pass Validate on its own.
func Default() *Config {
	return &Config{
		BasePath: "/api",
		Host:     "0.0.0.0",
		Port:     3000,
		Roles:    RoleAll,
		Gateway:  Gateway{Region: "default", ControlListen: ":8444", WebSocket: GatewayWebSocket{Listen: ":443", Path: wsnet.DefaultPath}},
		Log:      Log{Level: "info", Format: "json"},
		Otel:     Otel{SampleRatio: 1},
		Retention: Retention{
			Outbox:    7 * 24 * time.Hour,
			Commands:  30 * 24 * time.Hour,
			Audit:     365 * 24 * time.Hour,
			Tunnels:   30 * 24 * time.Hour,
			GPUHealth: 90 * 24 * time.Hour,
			GPUUsage:  90 * 24 * time.Hour,
		},
		Limits:   defaultLimits(),
		Webhooks: Webhooks{Retry: defaultWebhookRetry()},
		Auth:     defaultAuth(),

		RateLimits: defaultRateLimits(),
		Tunnels:    defaultTunnels(),
	}
}

// RoleSet returns the roles this process runs. "all" expands to every role, except the gateway
// when gateway.listen is unset. Unknown names, which Validate rejects, are left out.
func (c *Config) RoleSet() map[string]bool {
	known := make(map[string]bool)
	for _, r := range Roles() {
		known[r] = true
	}
	set := make(map[string]bool)
	for _, r := range splitList(c.Roles) {
		switch {
		case r == RoleAll:
			for _, a := range Roles() {
				if a != RoleGateway || c.Gateway.Listen != "" {
					set[a] = true
				}
			}
		case known[r]:
			set[r] = true
		}
	}
	return set
}

// RequireDatabase reports an error naming the key and its variable when no database URL is set,
// for commands that cannot run without one.
func (c *Config) RequireDatabase() error {
	if c.Database.URL == "" {
		return &Error{Problems: []Problem{{
			Key:     "database.url",
			Message: fmt.Sprintf("required (set %s)", envName("database.url")),
		}}}
	}
	return nil
}

// Problem is one thing wrong with a configuration, tied to the key an operator has to fix.
type Problem struct {
	// Key is the dotted YAML path, e.g. database.url or cors.allowedOrigins[1].
	Key string
	// Message says what is wrong; it never contains the secret or a password.
	Message string
}

// String renders the problem as "key: message".
func (p Problem) String() string { return p.Key + ": " + p.Message }

// Error reports every problem found in a configuration, so one run shows all there is to fix.
type Error struct {
	// Problems are in the order found: file, then environment, then validation.
	Problems []Problem
}

// Error joins the problems with "; ".
func (e *Error) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.String()
	}
	return strings.Join(msgs, "; ")
}

// Redacted returns a copy whose secret and database password are replaced by "REDACTED", safe
// to print or serialise. The copy shares no memory with c.
func (c *Config) Redacted() *Config {
	r := *c
	r.Modules = append([]ModuleConfig(nil), c.Modules...)
	r.CORS.AllowedOrigins = cloneStrings(c.CORS.AllowedOrigins)
	r.RateLimits.TrustedProxies = cloneStrings(c.RateLimits.TrustedProxies)
	if r.Secret != "" {
		r.Secret = redactedMark
	}
	r.Database.URL = redactDatabaseURL(r.Database.URL)
	return &r
}

// String renders the redacted configuration as key=value pairs, keys as in the YAML file.
func (c Config) String() string {
	v := reflect.ValueOf(c.Redacted()).Elem()
	var b strings.Builder
	for i, f := range leaves(v.Type(), "") {
		if i > 0 {
			b.WriteByte(' ')
		}
		fv := v.FieldByIndex(f.index)
		switch fv.Kind() {
		case reflect.String, reflect.Slice:
			fmt.Fprintf(&b, "%s=%q", f.key, fv.Interface())
		default:
			fmt.Fprintf(&b, "%s=%v", f.key, fv.Interface())
		}
	}
	return b.String()
}

// Format makes every fmt verb (%v, %+v, %#v, %d, …) print String, so no verb can reach the
// secret through the struct's fields.
func (c Config) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, c.String())
}

// LogValue logs the redacted configuration as a group with the YAML keys.
func (c Config) LogValue() slog.Value {
	return groupValue(reflect.ValueOf(c.Redacted()).Elem())
}

// groupValue turns a struct into a slog group keyed by its yaml tags.
func groupValue(v reflect.Value) slog.Value {
	var attrs []slog.Attr
	for i := range v.NumField() {
		name := yamlName(v.Type().Field(i))
		if name == "" {
			continue
		}
		fv := v.Field(i)
		if fv.Kind() == reflect.Struct {
			attrs = append(attrs, slog.Attr{Key: name, Value: groupValue(fv)})
		} else {
			attrs = append(attrs, slog.Any(name, fv.Interface()))
		}
	}
	return slog.GroupValue(attrs...)
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

// redactedMark replaces the secret and passwords in printed configurations.
const redactedMark = "REDACTED"

// dsnPassword matches the password of a key=value connection string, quoted or not.
var dsnPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'?|\S*)`)

// redactDatabaseURL replaces the password of a PostgreSQL URL (in the user info or a password
// query parameter) or key=value string. A URL that cannot be parsed is replaced whole.
func redactDatabaseURL(s string) string {
	if s == "" {
		return ""
	}
	if !isURL(s) {
		return dsnPassword.ReplaceAllString(s, "${1}"+redactedMark)
	}
	u, err := url.Parse(s)
	if err != nil {
		return redactedMark
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), redactedMark)
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", redactedMark)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// databasePassword returns the password in a connection string, or "" when there is none or the
// string cannot be parsed.
func databasePassword(s string) string {
	if s == "" {
		return ""
	}
	cfg, err := pgconn.ParseConfig(s)
	if err != nil {
		return ""
	}
	return cfg.Password
}
