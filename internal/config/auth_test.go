package config

import (
	"strings"
	"testing"
	"time"
)

// TestAuth: the defaults, the example configuration shows them, and the file and the
// environment set them.
func TestAuth(t *testing.T) {
	t.Parallel()
	want := Auth{Sessions: AuthSessions{IdleTimeout: 12 * time.Hour, AbsoluteTimeout: 168 * time.Hour}, TokenTTL: time.Hour, JWKSCooldown: 5 * time.Minute,
		Flows: AuthFlows{PerAddress: 20, PerMethod: 10_000, CountedFor: 2 * time.Minute}}
	if d := Default().Auth; d != want {
		t.Errorf("default auth %+v, want %+v", d, want)
	}
	c, err := Load("../../better-compute.example.yaml", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://bc@db.internal/bc"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth != want {
		t.Errorf("example auth %+v, want the defaults %+v", c.Auth, want)
	}
	c, err = load(t, "auth:\n  sessions: {idleTimeout: 30m}\n  tokenTTL: 10m\n", withSecret("BETTER_COMPUTE_AUTH_ALLOW_PRIVATE_ISSUERS=true"))
	if err != nil {
		t.Fatal(err)
	}
	got := want
	got.Sessions.IdleTimeout, got.TokenTTL, got.AllowPrivateIssuers = 30*time.Minute, 10*time.Minute, true
	if c.Auth != got {
		t.Errorf("auth = %+v, want %+v", c.Auth, got)
	}
}

func TestAuthValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		key, want  string
	}{
		{"idle too short", "auth: {sessions: {idleTimeout: 10s}}", "auth.sessions.idleTimeout", "must be from 1m0s to 720h0m0s, got 10s"},
		{"idle too long", "auth: {sessions: {idleTimeout: 800h, absoluteTimeout: 900h}}", "auth.sessions.idleTimeout", "got 800h0m0s"},
		{"absolute under idle", "auth: {sessions: {idleTimeout: 2h, absoluteTimeout: 1h}}", "auth.sessions.absoluteTimeout", "must be from auth.sessions.idleTimeout (2h0m0s)"},
		{"absolute too long", "auth: {sessions: {absoluteTimeout: 2200h}}", "auth.sessions.absoluteTimeout", "got 2200h0m0s"},
		{"token ttl", "auth: {tokenTTL: 25h}", "auth.tokenTTL", "must be from 1m0s to 24h0m0s"},
		{"jwks cooldown", "auth: {jwksCooldown: 0s}", "auth.jwksCooldown", "must be from 1s to 1h0m0s, got 0s"},
		{"flows per address", "auth: {flows: {perAddress: 0}}", "auth.flows.perAddress", "must be from 1 to 10000, got 0"},
		{"flows per method", "auth: {flows: {perMethod: 2000000}}", "auth.flows.perMethod", "must be from 1 to 1000000"},
		{"flows counted for", "auth: {flows: {countedFor: 1s}}", "auth.flows.countedFor", "must be from 10s to 10m0s, got 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, withSecret())
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			if !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want %s: %s", err, tc.key, tc.want)
			}
		})
	}
}
