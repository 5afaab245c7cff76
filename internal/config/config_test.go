package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// testSecret is long enough and distinctive, so a leak is easy to spot.
const testSecret = "s3cret-Value-THAT-must-never-leak-0123456789"

const dbPassword = "hunter2-db-password"

// withSecret returns environ plus a valid secret.
func withSecret(environ ...string) []string {
	return append([]string{"BETTER_COMPUTE_SECRET=" + testSecret}, environ...)
}

// writeConfig writes a YAML file into a fresh directory and returns its path.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "better-compute.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// load loads yaml (no file when "") with environ.
func load(t *testing.T, yaml string, environ []string) (*Config, error) {
	t.Helper()
	path := ""
	if yaml != "" {
		path = writeConfig(t, yaml)
	}
	return Load(path, environ)
}

// problemKeys returns the keys of the problems in err, failing when err is not an *Error.
func problemKeys(t *testing.T, err error) []string {
	t.Helper()
	var cerr *Error
	if !errors.As(err, &cerr) {
		t.Fatalf("error %v is not a *config.Error", err)
	}
	var keys []string
	for _, p := range cerr.Problems {
		keys = append(keys, p.Key)
	}
	return keys
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		yaml string
	}{
		{"no file", ""},
		{"empty file", "\n"},
		{"comments only", "# nothing set\n"},
		{"null sections", "gateway:\ncors: ~\nlog: null\nbaseURL:\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tc.yaml, withSecret())
			if err != nil {
				t.Fatal(err)
			}
			want := Default()
			want.Secret = testSecret
			if !reflect.DeepEqual(c, want) {
				t.Errorf("got %#v, want %#v", *c, *want) // redacted, but the diff shows
			}
		})
	}
	d := Default()
	for _, tc := range []struct {
		key  string
		got  any
		want any
	}{
		{"basePath", d.BasePath, "/api"},
		{"host", d.Host, "0.0.0.0"},
		{"port", d.Port, 3000},
		{"roles", d.Roles, "all"},
		{"modules", len(d.Modules), 0},
		{"gateway.listen", d.Gateway.Listen, ""},
		{"gateway.region", d.Gateway.Region, "default"},
		{"gateway.controlListen", d.Gateway.ControlListen, ":8444"},
		{"gateway.websocket.listen", d.Gateway.WebSocket.Listen, ":443"},
		{"gateway.websocket.path", d.Gateway.WebSocket.Path, "/bettercompute.daemon.v1/websocket"},
		{"cors.allowCredentials", d.CORS.AllowCredentials, false},
		{"log.level", d.Log.Level, "info"},
		{"log.format", d.Log.Format, "json"},
		{"metrics.listen", d.Metrics.Listen, ""},
		{"otel.endpoint", d.Otel.Endpoint, ""},
		{"otel.sampleRatio", d.Otel.SampleRatio, 1.0},
	} {
		if tc.got != tc.want {
			t.Errorf("default %s = %v, want %v", tc.key, tc.got, tc.want)
		}
	}
}

func TestFileAndEnv(t *testing.T) {
	t.Parallel()
	const file = `
secret: ` + testSecret + `
baseURL: https://compute.example.com
basePath: /v1/api
database:
  url: postgres://bc@db.internal:5432/bc
host: 127.0.0.1
port: 8080
roles: api, controllers
modules: [billing, quotas]
gateway:
  listen: ":8443"
  region: eu-west-1
  publicEndpoint: gw.example.com:443
cors:
  allowedOrigins:
    - https://app.example.com
    - http://localhost:5173
  allowCredentials: true
trustDomain: example.com
log:
  level: debug
  format: text
metrics:
  listen: ":9090"
otel:
  endpoint: http://otel-collector:4318
  sampleRatio: 0.25
`
	for _, tc := range []struct {
		name  string
		env   []string
		check func(*Config) error
	}{
		{"file only", nil, func(c *Config) error {
			want := &Config{
				Secret:   testSecret,
				BaseURL:  "https://compute.example.com",
				BasePath: "/v1/api",
				Database: Database{URL: "postgres://bc@db.internal:5432/bc"},
				Host:     "127.0.0.1",
				Port:     8080,
				Roles:    "api, controllers",
				Modules:  []ModuleConfig{{Name: "billing"}, {Name: "quotas"}},
				Gateway: Gateway{Listen: ":8443", Region: "eu-west-1", ControlListen: ":8444", PublicEndpoint: "gw.example.com:443",
					WebSocket: Default().Gateway.WebSocket},
				CORS:        CORS{AllowedOrigins: []string{"https://app.example.com", "http://localhost:5173"}, AllowCredentials: true},
				TrustDomain: "example.com",
				Log:         Log{Level: "debug", Format: "text"},
				Metrics:     Metrics{Listen: ":9090"},
				Otel:        Otel{Endpoint: "http://otel-collector:4318", SampleRatio: 0.25},
				Retention:   Default().Retention,
				Limits:      Default().Limits,
				RateLimits:  Default().RateLimits,
				Webhooks:    Default().Webhooks,
				Auth:        Default().Auth,
				Tunnels:     Default().Tunnels,
			}
			// Module entries carry their (absent) sections and the environment: compare names.
			if fmt.Sprint(c.Modules) != fmt.Sprint(want.Modules) {
				return fmt.Errorf("modules %v, want %v", c.Modules, want.Modules)
			}
			c.Modules, want.Modules = nil, nil
			if !reflect.DeepEqual(c, want) {
				return fmt.Errorf("got %s\nwant %s", c, want)
			}
			return nil
		}},
		{"env overrides scalars", []string{
			"BETTER_COMPUTE_PORT=9000",
			"BETTER_COMPUTE_BASE_URL=http://localhost:9000",
			"BETTER_COMPUTE_GATEWAY_REGION=us-east",
			"BETTER_COMPUTE_CORS_ALLOW_CREDENTIALS=false",
			"BETTER_COMPUTE_LOG_LEVEL=warn",
		}, func(c *Config) error {
			if c.Port != 9000 || c.BaseURL != "http://localhost:9000" || c.Gateway.Region != "us-east" ||
				c.CORS.AllowCredentials || c.Log.Level != "warn" {
				return fmt.Errorf("overrides not applied: %s", c)
			}
			if c.Host != "127.0.0.1" || c.Gateway.Listen != ":8443" {
				return fmt.Errorf("file values lost: %s", c)
			}
			return nil
		}},
		{"empty env clears a string and a list", []string{"BETTER_COMPUTE_DATABASE_URL=", "BETTER_COMPUTE_MODULES="}, func(c *Config) error {
			if c.Database.URL != "" || len(c.Modules) != 0 {
				return fmt.Errorf("database.url %q, modules %q, want both empty", c.Database.URL, c.Modules)
			}
			return nil
		}},
		{"later duplicate wins", []string{"BETTER_COMPUTE_PORT=1", "BETTER_COMPUTE_PORT=2"}, func(c *Config) error {
			if c.Port != 2 {
				return fmt.Errorf("port %d, want 2", c.Port)
			}
			return nil
		}},
		{"unrelated variables ignored", []string{"PORT=1", "BETTER_COMPUTE_NOT_A_KEY=x"}, func(c *Config) error {
			if c.Port != 8080 {
				return fmt.Errorf("port %d, want 8080", c.Port)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, file, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.check(c); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestEnvOnly(t *testing.T) {
	t.Parallel()
	c, err := Load("", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://localhost/bc", "BETTER_COMPUTE_ROLES=api"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Database.URL != "postgres://localhost/bc" || c.Roles != "api" {
		t.Errorf("got %s", c)
	}
}

func TestInterpolation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		yaml  string // the value of baseURL unless it sets other keys
		env   []string
		check func(*Config) string // returns the value to compare with want
		want  string
	}{
		{"variable", "baseURL: ${URL}", []string{"URL=https://x.example.com"}, baseURL, "https://x.example.com"},
		{"inside text", "baseURL: https://${HOST}:${PORT}/", []string{"HOST=h.example.com", "PORT=8080"}, baseURL, "https://h.example.com:8080/"},
		{"default when unset", "baseURL: ${URL:-https://d.example.com}", nil, baseURL, "https://d.example.com"},
		{"default when empty", "baseURL: ${URL:-https://d.example.com}", []string{"URL="}, baseURL, "https://d.example.com"},
		{"set beats default", "baseURL: ${URL:-https://d.example.com}", []string{"URL=https://s.example.com"}, baseURL, "https://s.example.com"},
		{"empty default", "baseURL: ${URL:-}", nil, baseURL, ""},
		{"set but empty", "baseURL: ${URL}", []string{"URL="}, baseURL, ""},
		{"dollar escape", "modules: [a$$b]", nil, module0, "a$b"},
		{"escaped reference stays literal", "modules: ['$${NOT_SET}']", nil, module0, "${NOT_SET}"},
		{"lone dollar kept", "modules: [pa$word$]", nil, module0, "pa$word$"},
		{"quoted", `modules: ["${M}", '${M}-2']`, []string{"M=x"}, func(c *Config) string { return c.Modules[0].Name + "," + c.Modules[1].Name }, "x,x-2"},
		{"int field", "port: ${PORT:-4000}", nil, func(c *Config) string { return fmt.Sprint(c.Port) }, "4000"},
		{"bool field", "cors: {allowCredentials: '${CRED}'}", []string{"CRED=true"}, func(c *Config) string { return fmt.Sprint(c.CORS.AllowCredentials) }, "true"},
		{"nested key", "database:\n  url: ${DB}", []string{"DB=postgres://localhost/x"}, func(c *Config) string { return c.Database.URL }, "postgres://localhost/x"},
		{"no YAML injection", "modules:\n  - ${M}", []string{"M=a, b]\nsecret: injected\nfoo: [1"}, module0, "a, b]\nsecret: injected\nfoo: [1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, tc.yaml, withSecret(tc.env...))
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.check(c); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func baseURL(c *Config) string { return c.BaseURL }
func module0(c *Config) string { return c.Modules[0].Name }

func TestInterpolationErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		yaml string
		want string
	}{
		{"unset", "database:\n  url: ${BETTER_COMPUTE_DB}", "database.url: environment variable BETTER_COMPUTE_DB is not set"},
		{"unset in list", "modules: [ok, '${MOD}']", "modules[1]: environment variable MOD is not set"},
		{"unset int", "port: ${PORT}", "port: environment variable PORT is not set"},
		{"unterminated", "baseURL: ${URL", `baseURL: unterminated "${"`},
		{"bad name", "baseURL: ${1URL}", `baseURL: invalid "${...}" reference`},
		{"empty name", "baseURL: ${}", `baseURL: invalid "${...}" reference`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, withSecret())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestEnvOverrideSkipsFileValue(t *testing.T) {
	t.Parallel()
	// The file's reference would fail, but the environment sets the key, so it is never read.
	c, err := load(t, "database:\n  url: ${UNSET}", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://localhost/x"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Database.URL != "postgres://localhost/x" {
		t.Errorf("database.url %q", c.Database.URL)
	}
}

func TestStructureErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		yaml string
		want string
	}{
		{"unknown top-level key", "secrte: x", "secrte: unknown key"},
		{"unknown nested key", "gateway:\n  lisen: :8443", "gateway.lisen: unknown key"},
		{"unknown deeper key", "log:\n  levle: debug", "log.levle: unknown key"}, //nolint:misspell // the typo is the test
		{"case typo suggests", "baseUrl: https://x.example.com", "baseUrl: unknown key (did you mean baseURL?)"},
		{"duplicate key", "port: 1\nport: 2", "port: set twice (lines 1 and 2)"},
		{"scalar for mapping", "gateway: yes", "gateway: must be a mapping"},
		{"list for scalar", "port: [1]", "port: must be a single value, not a list"},
		{"scalar for list", "modules: billing", "modules: must be a list"},
		{"bad int", "port: abc", "port: must be an integer"},
		{"bad bool", "cors:\n  allowCredentials: maybe", "cors.allowCredentials: must be true or false"},
		{"bad env int", "", "port: BETTER_COMPUTE_PORT: must be an integer"},
		{"bad env bool", "", "cors.allowCredentials: BETTER_COMPUTE_CORS_ALLOW_CREDENTIALS: must be true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := withSecret("BETTER_COMPUTE_PORT=x", "BETTER_COMPUTE_CORS_ALLOW_CREDENTIALS=")
			if tc.yaml != "" {
				env = withSecret()
			}
			_, err := load(t, tc.yaml, env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		yaml string
		want string
	}{
		{"syntax error", "port: [1", "parse config"},
		{"top level list", "- a", "top level must be a mapping"},
		{"two documents", "port: 1\n---\nport: 2", "more than one YAML document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, withSecret())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), withSecret()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: error %v, want os.ErrNotExist", err)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		yaml string
		env  []string
		key  string // the only problem's key
		want string // part of its message
	}{
		{"secret missing", "", []string{}, "secret", "required (set BETTER_COMPUTE_SECRET)"},
		{"secret short", "", []string{"BETTER_COMPUTE_SECRET=short"}, "secret", "at least 32 characters"},
		{"baseURL relative", "", withSecret("BETTER_COMPUTE_BASE_URL=/x"), "baseURL", "absolute http or https URL"},
		{"baseURL ftp", "", withSecret("BETTER_COMPUTE_BASE_URL=ftp://x.example.com"), "baseURL", "absolute http or https URL"},
		{"basePath no slash", "", withSecret("BETTER_COMPUTE_BASE_PATH=api"), "basePath", "must start with /"},
		{"basePath trailing slash", "", withSecret("BETTER_COMPUTE_BASE_PATH=/api/"), "basePath", "no trailing slash"},
		{"basePath root", "", withSecret("BETTER_COMPUTE_BASE_PATH=/"), "basePath", "must start with /"},
		{"basePath bad char", "", withSecret("BETTER_COMPUTE_BASE_PATH=/a.b"), "basePath", "only letters"},
		{"basePath empty", "basePath: ''", withSecret(), "basePath", "must start with /"},
		{"database url bad port", "", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://u@h:notaport/db"), "database.url", "malformed URL"},
		{"database dsn bad", "", withSecret("BETTER_COMPUTE_DATABASE_URL=host=x port"), "database.url", "keyword/value"},
		{"database sslmode", "", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://h/db?sslmode=bogus"), "database.url", "sslmode is invalid"},
		{"database maxConns negative", "database: {maxConns: -1}", withSecret(), "database.maxConns", "0 (the default) or more"},
		{"database gatewayMaxConns negative", "database: {gatewayMaxConns: -1}", withSecret(), "database.gatewayMaxConns", "0 (the default) or more"},
		{"database workersMaxConns negative", "database: {workersMaxConns: -1}", withSecret(), "database.workersMaxConns", "0 (the default) or more"},
		{"database notifierMaxConns negative", "", withSecret("BETTER_COMPUTE_DATABASE_NOTIFIER_MAX_CONNS=-2"), "database.notifierMaxConns", "0 (the default) or more"},
		{"host", "", withSecret("BETTER_COMPUTE_HOST=not a host"), "host", "IP address or host name"},
		{"port high", "", withSecret("BETTER_COMPUTE_PORT=65536"), "port", "from 0 to 65535"},
		{"port negative", "port: -1", withSecret(), "port", "from 0 to 65535"},
		{"roles unknown", "", withSecret("BETTER_COMPUTE_ROLES=api,web"), "roles", `unknown role "web"`},
		{"roles all combined", "", withSecret("BETTER_COMPUTE_ROLES=all,api"), "roles", "cannot be combined"},
		{"roles empty", "", withSecret("BETTER_COMPUTE_ROLES= , "), "roles", "required"},
		{"gateway role without listen", "", withSecret("BETTER_COMPUTE_ROLES=gateway"), "gateway.listen", "required when roles include gateway"},
		{"module empty", "modules: [a, '']", withSecret(), "modules[1]", "must not be empty"},
		{"module null", "modules: [a, ~]", withSecret(), "modules[1]", "must not be empty"},
		{"gateway listen", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=8443"), "gateway.listen", "must be host:port"},
		{"gateway listen port", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:99999"), "gateway.listen", "port must be a number"},
		{"gateway region", "", withSecret("BETTER_COMPUTE_GATEWAY_REGION=eu/west"), "gateway.region", "letters, digits"},
		{"gateway control same", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8444"), "gateway.controlListen", "must differ"},
		{"gateway control empty", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8443", "BETTER_COMPUTE_GATEWAY_CONTROL_LISTEN="), "gateway.controlListen", "required"},
		{"gateway control bad", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8443", "BETTER_COMPUTE_GATEWAY_CONTROL_LISTEN=x"), "gateway.controlListen", "must be host:port"},
		{"websocket listen bad", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8443", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_ENABLED=true", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_LISTEN=x"), "gateway.websocket.listen", "must be host:port"},
		{"websocket listen clash", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8443", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_ENABLED=true", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_LISTEN=:8443"), "gateway.websocket.listen", "must differ"},
		{"websocket path", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8443", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_ENABLED=true", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_PATH=ws"), "gateway.websocket.path", "absolute path"},
		{"websocket cert alone", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8443", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_ENABLED=true", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_CERT_FILE=/c.pem"), "gateway.websocket.certFile", "go together"},
		{"websocket plain with cert", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8443", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_ENABLED=true", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_PLAIN=true",
			"BETTER_COMPUTE_GATEWAY_WEBSOCKET_CERT_FILE=/c.pem", "BETTER_COMPUTE_GATEWAY_WEBSOCKET_KEY_FILE=/k.pem"), "gateway.websocket.certFile", "serves no TLS"},
		{"gateway public endpoint", "", withSecret("BETTER_COMPUTE_GATEWAY_PUBLIC_ENDPOINT=:443"), "gateway.publicEndpoint", "host must be"},
		{"cors origin path", "", withSecret("BETTER_COMPUTE_CORS_ALLOWED_ORIGINS=https://a.example.com,https://b.example.com/app"), "cors.allowedOrigins[1]", "no path"},
		{"cors origin trailing slash", "cors:\n  allowedOrigins: [https://a.example.com/]", withSecret(), "cors.allowedOrigins[0]", "no path"},
		{"cors origin no scheme", "", withSecret("BETTER_COMPUTE_CORS_ALLOWED_ORIGINS=a.example.com"), "cors.allowedOrigins[0]", "scheme://host"},
		{"cors star with credentials", "cors:\n  allowedOrigins: ['*']\n  allowCredentials: true", withSecret(), "cors.allowCredentials", `contains "*"`},
		{"trust domain", "", withSecret("BETTER_COMPUTE_TRUST_DOMAIN=Example.com"), "trustDomain", "lower-case DNS name"},
		{"trust domain shape", "", withSecret("BETTER_COMPUTE_TRUST_DOMAIN=-x.com"), "trustDomain", "lower-case DNS name"},
		{"log level", "", withSecret("BETTER_COMPUTE_LOG_LEVEL=verbose"), "log.level", "debug, info, warn or error"},
		{"log format", "", withSecret("BETTER_COMPUTE_LOG_FORMAT=xml"), "log.format", "json or text"},
		{"metrics listen", "", withSecret("BETTER_COMPUTE_METRICS_LISTEN=9090"), "metrics.listen", "must be host:port"},
		{"metrics listen port", "metrics: {listen: ':70000'}", withSecret(), "metrics.listen", "port must be a number"},
		{"metrics listen on gateway", "", withSecret("BETTER_COMPUTE_GATEWAY_LISTEN=:8443", "BETTER_COMPUTE_METRICS_LISTEN=:8444"), "metrics.listen", "must differ"},
		{"otel endpoint relative", "", withSecret("BETTER_COMPUTE_OTEL_ENDPOINT=collector:4318"), "otel.endpoint", "absolute http or https URL"},
		{"otel endpoint grpc", "otel: {endpoint: 'grpc://c:4317'}", withSecret(), "otel.endpoint", "absolute http or https URL"},
		{"otel endpoint credentials", "", withSecret("BETTER_COMPUTE_OTEL_ENDPOINT=https://u:p@c.example.com"), "otel.endpoint", "must not hold credentials"},
		{"otel sample ratio high", "", withSecret("BETTER_COMPUTE_OTEL_SAMPLE_RATIO=1.5"), "otel.sampleRatio", "from 0 to 1"},
		{"otel sample ratio negative", "otel: {sampleRatio: -0.1}", withSecret(), "otel.sampleRatio", "from 0 to 1"},
		{"otel sample ratio not a number", "", withSecret("BETTER_COMPUTE_OTEL_SAMPLE_RATIO=half"), "otel.sampleRatio", "must be a number"},
		{"otel sample ratio NaN", "otel: {sampleRatio: NaN}", withSecret(), "otel.sampleRatio", "must be a number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, tc.env)
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			if keys := problemKeys(t, err); !slices.Equal(keys, []string{tc.key}) {
				t.Errorf("problem keys %q, want [%q]; error: %v", keys, tc.key, err)
			}
			if want := tc.key + ": "; !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q and %q", err, want, tc.want)
			}
		})
	}
}

func TestValidationCollectsEverything(t *testing.T) {
	t.Parallel()
	_, err := load(t, "port: 70000\nlog:\n  format: xml\nsecrte: x\n", nil)
	if err == nil {
		t.Fatal("loaded, want an error")
	}
	want := []string{"secrte", "secret", "port", "log.format"}
	if keys := problemKeys(t, err); !slices.Equal(keys, want) {
		t.Errorf("keys %q, want %q", keys, want)
	}
	if !strings.Contains(err.Error(), "; ") {
		t.Errorf("error %q does not join problems with \"; \"", err)
	}
}

func TestValidConfigurations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		yaml string
		env  []string
	}{
		{"cors star", "cors:\n  allowedOrigins: ['*']", nil},
		{"cors localhost port", "", []string{"BETTER_COMPUTE_CORS_ALLOWED_ORIGINS=http://localhost:5173,http://127.0.0.1:3000"}},
		{"database url", "", []string{"BETTER_COMPUTE_DATABASE_URL=postgres://u:p@db:5432/bc?sslmode=disable"}},
		{"database dsn", "", []string{"BETTER_COMPUTE_DATABASE_URL=host=/tmp dbname=bc user=bc"}},
		{"ipv6 listeners", "host: '::'\ngateway:\n  listen: '[::]:8443'\n  controlListen: '[::1]:8444'", nil},
		{"gateway role with listen", "roles: gateway,api\ngateway: {listen: ':8443'}", nil},
		{"port zero", "port: 0", nil},
		{"nested basePath", "basePath: /v1/compute_api", nil},
		{"host name", "host: localhost", nil},
		{"anchors and aliases", "modules: [&m billing, {name: quotas, config: *m}]\nlog: &l {level: debug}", nil},
		{"metrics listen", "metrics: {listen: '127.0.0.1:9090'}", nil},
		{"metrics listen beside gateway", "gateway: {listen: ':8443'}\nmetrics: {listen: ':9090'}", nil},
		{"otel endpoint with path", "", []string{"BETTER_COMPUTE_OTEL_ENDPOINT=https://otel.example.com/otlp/v1/traces", "BETTER_COMPUTE_OTEL_SAMPLE_RATIO=0"}},
		{"otel sample ratio integer", "otel: {endpoint: 'http://localhost:4318', sampleRatio: 1}", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := load(t, tc.yaml, withSecret(tc.env...)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSecretNeverLeaks(t *testing.T) {
	t.Parallel()
	dbURL := "postgres://bc:" + dbPassword + "@db.internal:5432/bc"
	c, err := load(t, "secret: ${S}\ndatabase:\n  url: "+dbURL, []string{"S=" + testSecret})
	if err != nil {
		t.Fatal(err)
	}
	var jsonLog, textLog bytes.Buffer
	slog.New(slog.NewJSONHandler(&jsonLog, nil)).Info("config", "config", c)
	slog.New(slog.NewTextHandler(&textLog, nil)).Info("config", "config", *c)
	outputs := map[string]string{
		"Sprint pointer": fmt.Sprint(c),
		"Sprint value":   fmt.Sprint(*c),
		"%+v":            fmt.Sprintf("%+v", *c),
		"%#v":            fmt.Sprintf("%#v", c),
		"%d":             fmt.Sprintf("%d", *c),
		"%s in struct":   fmt.Sprintf("%s", struct{ C Config }{*c}),
		"slog json":      jsonLog.String(),
		"slog text":      textLog.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, testSecret) || strings.Contains(out, dbPassword) {
			t.Errorf("%s leaks: %s", name, out)
		}
		if !strings.Contains(out, redactedMark) {
			t.Errorf("%s does not show the redaction: %s", name, out)
		}
	}
	if !strings.Contains(jsonLog.String(), `"url":"postgres://bc:REDACTED@db.internal:5432/bc"`) {
		t.Errorf("slog json does not keep the rest of the URL: %s", jsonLog.String())
	}
	if c.Secret != testSecret || c.Database.URL != dbURL {
		t.Error("printing changed the configuration")
	}
}

func TestSecretNeverInErrors(t *testing.T) {
	t.Parallel()
	const short = "tooShortButSecret"
	for _, tc := range []struct {
		name    string
		yaml    string
		environ []string
		secret  string // must not appear in the error
	}{
		{"short secret", "", []string{"BETTER_COMPUTE_SECRET=" + short}, short},
		{"short secret in file", "secret: " + short, nil, short},
		{"secret with broken reference", "secret: " + short + "${oops", nil, short},
		{"secret with bad name", "secret: ${" + short + "-x}", nil, short},
		{"secret as port", "port: ${S}", []string{"S=" + testSecret}, testSecret},
		{"secret under wrong key", "secret: ${S}\ntrustDomain: ${S}", []string{"S=" + testSecret}, testSecret},
		{"password under wrong key", "database: {url: 'postgres://u:" + dbPassword + "@h/db'}\nhost: " + dbPassword + "!", withSecret(), dbPassword},
		{"url malformed", "", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://u:" + dbPassword + "@h:bad/db"), dbPassword},
		{"url unescaped", "", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://u:" + dbPassword + "/x@h/db"), dbPassword},
		{"url bad option", "", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://u:" + dbPassword + "@h/db?sslmode=bogus"), dbPassword},
		{"dsn bad option", "", withSecret("BETTER_COMPUTE_DATABASE_URL=host=h password = " + dbPassword + " sslmode=bogus"), dbPassword},
		{"dsn bad port", "", withSecret("BETTER_COMPUTE_DATABASE_URL=host=h password='" + dbPassword + "' port=x"), dbPassword},
		{"dsn unterminated", "", withSecret("BETTER_COMPUTE_DATABASE_URL=host=h password='" + dbPassword), dbPassword},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, tc.environ)
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			if strings.Contains(err.Error(), tc.secret) {
				t.Errorf("error leaks the secret: %v", err)
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url, want string
	}{
		{"", ""},
		{"postgres://bc@h/db", "postgres://bc@h/db"},
		{"postgres://bc:pw@h/db", "postgres://bc:REDACTED@h/db"},
		{"postgresql://h/db?password=pw&sslmode=disable", "postgresql://h/db?password=REDACTED&sslmode=disable"},
		{"postgres://u:pw@h:bad/db", "REDACTED"},
		{"host=h password=pw dbname=x", "host=h password=REDACTED dbname=x"},
		{"host=h password = 'p w\\'x' dbname=x", "host=h password = REDACTED dbname=x"},
	} {
		c := Default()
		c.Secret = testSecret
		c.Database.URL = tc.url
		c.Modules = []ModuleConfig{{Name: "m"}}
		r := c.Redacted()
		if r.Database.URL != tc.want {
			t.Errorf("Redacted(%q).Database.URL = %q, want %q", tc.url, r.Database.URL, tc.want)
		}
		if r.Secret != redactedMark {
			t.Errorf("Redacted secret %q", r.Secret)
		}
		r.Modules[0].Name = "changed"
		if c.Modules[0].Name != "m" {
			t.Error("Redacted shares Modules with the original")
		}
	}
}

func TestCORSAllowedOriginsEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value string
		want  []string
	}{
		{"https://a.example.com", []string{"https://a.example.com"}},
		{"https://a.example.com,https://b.example.com:8443", []string{"https://a.example.com", "https://b.example.com:8443"}},
		{" https://a.example.com , http://localhost:5173 ,", []string{"https://a.example.com", "http://localhost:5173"}},
		{"*", []string{"*"}},
		{"", nil},
	} {
		t.Run(tc.value, func(t *testing.T) {
			t.Parallel()
			c, err := load(t, "cors:\n  allowedOrigins: [https://file.example.com]",
				withSecret("BETTER_COMPUTE_CORS_ALLOWED_ORIGINS="+tc.value))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.CORS.AllowedOrigins, tc.want) {
				t.Errorf("allowedOrigins %q, want %q", c.CORS.AllowedOrigins, tc.want)
			}
		})
	}
}

func TestEnvVars(t *testing.T) {
	t.Parallel()
	got := EnvVars()
	for _, want := range []string{
		"BETTER_COMPUTE_SECRET",
		"BETTER_COMPUTE_BASE_URL",
		"BETTER_COMPUTE_BASE_PATH",
		"BETTER_COMPUTE_DATABASE_URL",
		"BETTER_COMPUTE_HOST",
		"BETTER_COMPUTE_PORT",
		"BETTER_COMPUTE_ROLES",
		"BETTER_COMPUTE_MODULES",
		"BETTER_COMPUTE_GATEWAY_LISTEN",
		"BETTER_COMPUTE_GATEWAY_REGION",
		"BETTER_COMPUTE_GATEWAY_CONTROL_LISTEN",
		"BETTER_COMPUTE_GATEWAY_PUBLIC_ENDPOINT",
		"BETTER_COMPUTE_CORS_ALLOWED_ORIGINS",
		"BETTER_COMPUTE_CORS_ALLOW_CREDENTIALS",
		"BETTER_COMPUTE_TRUST_DOMAIN",
		"BETTER_COMPUTE_LOG_LEVEL",
		"BETTER_COMPUTE_LOG_FORMAT",
		"BETTER_COMPUTE_METRICS_LISTEN",
		"BETTER_COMPUTE_OTEL_ENDPOINT",
		"BETTER_COMPUTE_OTEL_SAMPLE_RATIO",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("EnvVars() lacks %s", want)
		}
	}
	seen := make(map[string]bool)
	for _, name := range got {
		if seen[name] {
			t.Errorf("EnvVars() lists %s twice: two keys share a variable", name)
		}
		seen[name] = true
	}
}

func TestEnvName(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"database.url":        "BETTER_COMPUTE_DATABASE_URL",
		"baseURL":             "BETTER_COMPUTE_BASE_URL",
		"basePath":            "BETTER_COMPUTE_BASE_PATH",
		"cors.allowedOrigins": "BETTER_COMPUTE_CORS_ALLOWED_ORIGINS",
		"gateway.listen":      "BETTER_COMPUTE_GATEWAY_LISTEN",
		"URLPath":             "BETTER_COMPUTE_URL_PATH",
		"http2Port":           "BETTER_COMPUTE_HTTP2_PORT",
	} {
		if got := envName(key); got != want {
			t.Errorf("envName(%q) = %s, want %s", key, got, want)
		}
	}
}

func TestRoleSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		roles, listen string
		want          []string
	}{
		{"all", "", []string{"api", "controllers", "iam", "scheduler", "sinks"}},
		{"all", ":8443", []string{"api", "controllers", "gateway", "iam", "scheduler", "sinks"}},
		{"api", "", []string{"api"}},
		{" scheduler , sinks", "", []string{"scheduler", "sinks"}},
		{"gateway,iam", ":8443", []string{"gateway", "iam"}},
	} {
		c := Default()
		c.Roles, c.Gateway.Listen = tc.roles, tc.listen
		var got []string
		for r := range c.RoleSet() {
			got = append(got, r)
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("RoleSet(%q, listen %q) = %q, want %q", tc.roles, tc.listen, got, tc.want)
		}
	}
}

func TestRequireDatabase(t *testing.T) {
	t.Parallel()
	c := Default()
	err := c.RequireDatabase()
	if err == nil || err.Error() != "database.url: required (set BETTER_COMPUTE_DATABASE_URL)" {
		t.Errorf("RequireDatabase() = %v", err)
	}
	c.Database.URL = "postgres://localhost/bc"
	if err := c.RequireDatabase(); err != nil {
		t.Errorf("RequireDatabase() with a URL = %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Secret = testSecret
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.Port = -5
	if keys := problemKeys(t, c.Validate()); !slices.Equal(keys, []string{"port"}) {
		t.Errorf("keys %q, want [port]", keys)
	}
}

func TestDurationsAndWebhooks(t *testing.T) {
	t.Parallel()
	cfg, err := Load("", []string{
		"BETTER_COMPUTE_SECRET=0123456789abcdef0123456789abcdef",
		"BETTER_COMPUTE_RETENTION_OUTBOX=48h",
		"BETTER_COMPUTE_WEBHOOKS_ALLOW_PRIVATE=true",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Retention.Outbox != 48*time.Hour || cfg.Retention.Audit != 365*24*time.Hour || !cfg.Webhooks.AllowPrivate {
		t.Errorf("retention %+v, webhooks %+v", cfg.Retention, cfg.Webhooks)
	}
	_, err = Load("", []string{"BETTER_COMPUTE_SECRET=0123456789abcdef0123456789abcdef", "BETTER_COMPUTE_RETENTION_AUDIT=forever"})
	if err == nil || !strings.Contains(err.Error(), "retention.audit") {
		t.Errorf("bad duration: %v", err)
	}
}
