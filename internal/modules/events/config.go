package events

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/better-compute/better-compute/module"
)

// Config is the module's configuration section. Its String, GoString and LogValue leave out every
// credential, so printing or logging it is safe.
type Config struct {
	// URL is the NATS server, or a comma-separated list of them: nats://, tls://, ws:// or
	// wss://. Required. Credentials in a URL are allowed (then credentials must be empty) and
	// never shown.
	URL string `yaml:"url"`
	// SubjectPrefix starts every subject: "<prefix>.<tenant id>.<event type>". One or more NATS
	// subject tokens separated by dots.
	SubjectPrefix string `yaml:"subjectPrefix"`
	// Stream is the JetStream stream that holds "<prefix>.>", created at start when missing.
	Stream string `yaml:"stream"`
	// Replicas is the stream's replicas when the module creates it (1 to 5).
	Replicas int `yaml:"replicas"`
	// MaxAge is how long the stream keeps a message, when the module creates it.
	MaxAge time.Duration `yaml:"maxAge"`
	// DuplicateWindow is how long the stream remembers message ids: a message published again
	// within it (a retry, or a new sinks process repeating what a dead one published) is dropped.
	DuplicateWindow time.Duration `yaml:"duplicateWindow"`
	// PublishTimeout bounds one publish, until the stream acknowledges it.
	PublishTimeout time.Duration `yaml:"publishTimeout"`
	TLS            TLSConfig     `yaml:"tls"`
	Credentials    Credentials   `yaml:"credentials"`
}

// TLSConfig verifies the NATS servers and presents a client certificate. Any field set turns
// TLS on.
type TLSConfig struct {
	// CAFile holds the PEM certificates that sign the servers'; the system's roots when empty.
	CAFile string `yaml:"caFile"`
	// CertFile and KeyFile are a client certificate and its key, in PEM; both or neither.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
	// ServerName is the name to verify in the servers' certificates, when it is not the URL's
	// host.
	ServerName string `yaml:"serverName"`
}

// Credentials authenticate to NATS: at most one kind.
type Credentials struct {
	Token    string `yaml:"token"`
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// NkeySeedFile holds an nkey seed ("SU…"), for nkey authentication.
	NkeySeedFile string `yaml:"nkeySeedFile"`
	// CredsFile is a user JWT and its nkey seed, as `nsc` writes them (decentralised auth).
	CredsFile string `yaml:"credsFile"`
}

// DefaultConfig is the configuration before the section is decoded: everything but the URL.
func DefaultConfig() Config {
	return Config{
		SubjectPrefix:   "bc",
		Stream:          "BC_EVENTS",
		Replicas:        1,
		MaxAge:          168 * time.Hour,
		DuplicateWindow: 2 * time.Minute,
		PublishTimeout:  5 * time.Second,
	}
}

var (
	// subjectToken is one token of a subject the module publishes on: printable ASCII without
	// the wildcards, the separator or spaces.
	subjectToken = regexp.MustCompile(`^[!-~]+$`)
	// streamName keeps to the characters every JetStream tool accepts in a stream name.
	streamName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
)

// validToken reports whether s is one NATS subject token, without wildcards.
func validToken(s string) bool {
	return subjectToken.MatchString(s) && !strings.ContainsAny(s, ".*>")
}

// validSubject reports whether s is dot-separated tokens, without wildcards.
func validSubject(s string) bool {
	for tok := range strings.SplitSeq(s, ".") {
		if !validToken(tok) {
			return false
		}
	}
	return s != ""
}

// Validate checks the section; each problem is a *module.FieldError naming its key. Messages
// never quote a credential.
func (c *Config) Validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &module.FieldError{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	servers, urlCreds, err := parseServers(c.URL)
	switch {
	case err != nil:
		bad("url", "%v", err)
	case urlCreds && c.Credentials.kind() != "":
		bad("url", "carries credentials, and credentials is set too: use one")
	case len(servers) == 0:
		bad("url", "is required: the NATS server, for example nats://nats:4222")
	}
	if !validSubject(c.SubjectPrefix) {
		bad("subjectPrefix", "must be NATS subject tokens separated by dots (printable ASCII, no spaces, * or >), for example bc")
	}
	if !streamName.MatchString(c.Stream) {
		bad("stream", "must be 1 to 255 letters, digits, _ or -, for example BC_EVENTS")
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		bad("replicas", "must be 1 to 5")
	}
	if c.MaxAge <= 0 {
		bad("maxAge", "must be positive, for example 168h")
	}
	switch {
	case c.DuplicateWindow <= 0:
		bad("duplicateWindow", "must be positive, for example 2m")
	case c.MaxAge > 0 && c.DuplicateWindow > c.MaxAge:
		bad("duplicateWindow", "must not be longer than maxAge (%s)", c.MaxAge)
	}
	if c.PublishTimeout <= 0 || c.PublishTimeout > time.Minute {
		bad("publishTimeout", "must be positive and at most 1m")
	}
	if _, err := c.TLS.config(); err != nil {
		if fe, ok := errors.AsType[*module.FieldError](err); ok {
			errs = append(errs, fe)
		} else {
			bad("tls", "%v", err)
		}
	}
	errs = append(errs, c.Credentials.validate()...)
	return errors.Join(errs...)
}

// parseServers splits a comma-separated URL list and checks each URL, reporting whether any
// carries credentials. Errors never quote a URL, which may hold a password.
func parseServers(list string) (servers []*url.URL, withCreds bool, err error) {
	for i, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, false, fmt.Errorf("URL %d does not parse", i+1)
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return nil, false, fmt.Errorf("URL %d: the scheme must be nats, tls, ws or wss", i+1)
		}
		if u.Hostname() == "" {
			return nil, false, fmt.Errorf("URL %d has no host", i+1)
		}
		withCreds = withCreds || u.User != nil
		servers = append(servers, u)
	}
	return servers, withCreds, nil
}

// Servers are the configured URLs without credentials, for logs, doctor and the status API.
func (c *Config) Servers() []string {
	servers, _, err := parseServers(c.URL)
	if err != nil {
		return []string{"[invalid URL]"}
	}
	out := make([]string, len(servers))
	for i, u := range servers {
		out[i] = (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	}
	return out
}

// config builds the TLS configuration, nil when the section is empty.
func (t TLSConfig) config() (*tls.Config, error) {
	if t == (TLSConfig{}) {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, &module.FieldError{Key: "tls.caFile", Message: fmt.Sprintf("cannot be read: %v", errors.Unwrap(err))}
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, &module.FieldError{Key: "tls.caFile", Message: "holds no PEM certificate"}
		}
	}
	switch {
	case t.CertFile == "" && t.KeyFile != "":
		return nil, &module.FieldError{Key: "tls.certFile", Message: "is required with tls.keyFile"}
	case t.CertFile != "" && t.KeyFile == "":
		return nil, &module.FieldError{Key: "tls.keyFile", Message: "is required with tls.certFile"}
	case t.CertFile != "":
		pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, &module.FieldError{Key: "tls.certFile", Message: "and tls.keyFile are not a readable PEM certificate and its key"}
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// kind names the kind of credentials set, "" for none, and several joined with " and ".
func (c Credentials) kind() string {
	var kinds []string
	if c.Token != "" {
		kinds = append(kinds, "token")
	}
	if c.User != "" || c.Password != "" {
		kinds = append(kinds, "user/password")
	}
	if c.NkeySeedFile != "" {
		kinds = append(kinds, "nkeySeedFile")
	}
	if c.CredsFile != "" {
		kinds = append(kinds, "credsFile")
	}
	return strings.Join(kinds, " and ")
}

func (c Credentials) validate() []error {
	var errs []error
	bad := func(key, msg string) { errs = append(errs, &module.FieldError{Key: key, Message: msg}) }
	if k := c.kind(); strings.Contains(k, " and ") {
		bad("credentials", "sets "+k+": set at most one kind (token, user and password, nkeySeedFile, or credsFile)")
		return errs
	}
	switch {
	case c.User != "" && c.Password == "":
		bad("credentials.password", "is required with credentials.user")
	case c.User == "" && c.Password != "":
		bad("credentials.user", "is required with credentials.password")
	}
	for key, path := range map[string]string{"credentials.nkeySeedFile": c.NkeySeedFile, "credentials.credsFile": c.CredsFile} {
		if path == "" {
			continue
		}
		if f, err := os.Open(path); err != nil {
			bad(key, fmt.Sprintf("cannot be read: %v", errors.Unwrap(err)))
		} else {
			_ = f.Close()
		}
	}
	return errs
}

// String shows the configuration without credentials.
func (c Config) String() string {
	return fmt.Sprintf("events{url: %s, subjectPrefix: %s, stream: %s, replicas: %d, maxAge: %s, duplicateWindow: %s, publishTimeout: %s, tls: %t, credentials: %s}",
		strings.Join(c.Servers(), ","), c.SubjectPrefix, c.Stream, c.Replicas, c.MaxAge, c.DuplicateWindow, c.PublishTimeout,
		c.TLS != (TLSConfig{}), c.Credentials)
}

// GoString is String, so %#v does not print credentials either.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration without credentials.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", strings.Join(c.Servers(), ",")), slog.String("subject_prefix", c.SubjectPrefix),
		slog.String("stream", c.Stream), slog.Int("replicas", c.Replicas), slog.Duration("max_age", c.MaxAge),
		slog.Duration("duplicate_window", c.DuplicateWindow), slog.Duration("publish_timeout", c.PublishTimeout),
		slog.Bool("tls", c.TLS != (TLSConfig{})), slog.Any("credentials", c.Credentials))
}

// String names the kind of credentials only: "none", "token", "user/password", ….
func (c Credentials) String() string {
	if k := c.kind(); k != "" {
		return k + " [redacted]"
	}
	return "none"
}

// GoString is String.
func (c Credentials) GoString() string { return c.String() }

// LogValue is String.
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }
