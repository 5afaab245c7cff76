package events

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/module"
)

// fieldKeys lists the keys of the *module.FieldError problems in err.
func fieldKeys(err error) []string {
	var keys []string
	var walk func(error)
	walk = func(err error) {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		if fe, ok := errors.AsType[*module.FieldError](err); ok {
			keys = append(keys, fe.Key)
		}
	}
	walk(err)
	slices.Sort(keys)
	return keys
}

// TestValidateNamesKeys: each bad setting is a problem naming its key, and a good configuration
// has none.
func TestValidateNamesKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seed := filepath.Join(dir, "user.nk")
	if err := os.WriteFile(seed, []byte("SUAM…"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := func() Config { c := DefaultConfig(); c.URL = "nats://a:4222, tls://b:4222"; return c }
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		keys  []string
		avoid string // a secret the messages must not show
	}{
		{"good", func(*Config) {}, nil, ""},
		{"good with user and password", func(c *Config) { c.Credentials.User, c.Credentials.Password = "bc", "hunter2" }, nil, ""},
		{"good with nkey seed", func(c *Config) { c.Credentials.NkeySeedFile = seed }, nil, ""},
		{"no url", func(c *Config) { c.URL = " , " }, []string{"url"}, ""},
		{"http url", func(c *Config) { c.URL = "http://user:s3cret@nats:4222" }, []string{"url"}, "s3cret"},
		{"url without host", func(c *Config) { c.URL = "nats://" }, []string{"url"}, ""},
		{"credentials in url and section", func(c *Config) { c.URL = "nats://u:s3cret@a:4222"; c.Credentials.Token = "tok" }, []string{"url"}, "s3cret"},
		{"wildcard prefix", func(c *Config) { c.SubjectPrefix = "bc.*" }, []string{"subjectPrefix"}, ""},
		{"empty prefix token", func(c *Config) { c.SubjectPrefix = "bc..x" }, []string{"subjectPrefix"}, ""},
		{"prefix with space", func(c *Config) { c.SubjectPrefix = "b c" }, []string{"subjectPrefix"}, ""},
		{"dotted stream", func(c *Config) { c.Stream = "BC.EVENTS" }, []string{"stream"}, ""},
		{"replicas", func(c *Config) { c.Replicas = 7 }, []string{"replicas"}, ""},
		{"durations", func(c *Config) { c.MaxAge, c.PublishTimeout = 0, 2*time.Minute }, []string{"maxAge", "publishTimeout"}, ""},
		{"window past max age", func(c *Config) { c.MaxAge, c.DuplicateWindow = time.Minute, time.Hour }, []string{"duplicateWindow"}, ""},
		{"missing ca", func(c *Config) { c.TLS.CAFile = filepath.Join(dir, "none.pem") }, []string{"tls.caFile"}, ""},
		{"ca not pem", func(c *Config) { c.TLS.CAFile = seed }, []string{"tls.caFile"}, ""},
		{"key without cert", func(c *Config) { c.TLS.KeyFile = seed }, []string{"tls.certFile"}, ""},
		{"cert not pem", func(c *Config) { c.TLS.CertFile, c.TLS.KeyFile = seed, seed }, []string{"tls.certFile"}, ""},
		{"two kinds", func(c *Config) { c.Credentials.Token, c.Credentials.CredsFile = "t0ken", seed }, []string{"credentials"}, "t0ken"},
		{"user without password", func(c *Config) { c.Credentials.User = "bc" }, []string{"credentials.password"}, ""},
		{"password without user", func(c *Config) { c.Credentials.Password = "hunter2" }, []string{"credentials.user"}, "hunter2"},
		{"missing creds file", func(c *Config) { c.Credentials.CredsFile = filepath.Join(dir, "none.creds") }, []string{"credentials.credsFile"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := good()
			tc.edit(&c)
			err := c.Validate()
			if got := fieldKeys(err); !slices.Equal(got, tc.keys) {
				t.Fatalf("keys %v, want %v (%v)", got, tc.keys, err)
			}
			if tc.avoid != "" && strings.Contains(err.Error(), tc.avoid) {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
}

// TestConfigurationFromTheFile: the module's section decodes from the configuration file, with
// its defaults for keys not set, and its problems are named modules[i].config.<key>.
func TestConfigurationFromTheFile(t *testing.T) {
	t.Parallel()
	load := func(section string) (*Module, error) {
		path := filepath.Join(t.TempDir(), "bc.yaml")
		body := fmt.Sprintf("secret: %s\nmodules:\n  - name: events\n    config:\n%s", testSecret, section)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(path, []string{"NATS_TOKEN=t0ken-from-env"})
		if err != nil {
			t.Fatal(err)
		}
		set, err := moduleset.Registry{Info()}.Enable(cfg.Modules)
		if err != nil {
			return nil, err
		}
		return set[0].(*Module), nil
	}
	m, err := load("      url: nats://nats:4222\n      duplicateWindow: 5m\n      credentials: {token: '${NATS_TOKEN}'}\n")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.URL, want.DuplicateWindow, want.Credentials.Token = "nats://nats:4222", 5*time.Minute, "t0ken-from-env"
	if m.cfg != want {
		t.Fatalf("config %+v, want %+v", m.cfg, want)
	}
	_, err = load("      url: http://nats\n      replicas: 9\n      tls: {certFile: /nonexistent}\n      nope: 1\n")
	msg := fmt.Sprint(err)
	for _, key := range []string{"modules[0].config.nope"} {
		if !strings.Contains(msg, key) {
			t.Fatalf("%q does not name %s", msg, key)
		}
	}
	_, err = load("      url: http://nats\n      replicas: 9\n      tls: {certFile: /nonexistent}\n")
	msg = fmt.Sprint(err)
	for _, key := range []string{"modules[0].config.url:", "modules[0].config.replicas:", "modules[0].config.tls.keyFile:"} {
		if !strings.Contains(msg, key) {
			t.Fatalf("%q does not name %s", msg, key)
		}
	}
}

// TestConfigNeverShowsCredentials: printing or logging the configuration shows no credential,
// whichever way.
func TestConfigNeverShowsCredentials(t *testing.T) {
	t.Parallel()
	c := DefaultConfig()
	c.URL = "nats://alice:pa55word@nats-1:4222,nats://nats-2:4222"
	c.Credentials = Credentials{Token: "t0ken-secret"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", c, "credentials", c.Credentials)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "config", c)
	out := fmt.Sprintf("%v %+v %#v %s %v", c, c, c, &c, c.Credentials) + logs.String()
	for _, secret := range []string{"pa55word", "alice", "t0ken-secret"} {
		if strings.Contains(out, secret) {
			t.Fatalf("%q shows %s", out, secret)
		}
	}
	if !strings.Contains(out, "nats://nats-1:4222,nats://nats-2:4222") || !strings.Contains(out, "token [redacted]") {
		t.Fatalf("%q does not show the servers and the kind of credentials", out)
	}
	if got := c.Servers(); !slices.Equal(got, []string{"nats://nats-1:4222", "nats://nats-2:4222"}) {
		t.Fatalf("servers %v", got)
	}
}
