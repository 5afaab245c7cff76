package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLimitsDefaults(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", withSecret())
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{
		RequestBytes: 4 << 20, HeaderBytes: 64 << 10,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
		DaemonRequestBytes: 64 << 10, DaemonHelloBytes: 1 << 20, DaemonResultBytes: 4 << 20, DaemonEventBytes: 64 << 10,
		GatewaySessions:       20_000,
		GatewayAnonymousConns: 512, GatewayAnonymousConnsPerAddress: 64,
		GatewayJoinsInFlight: 128, GatewayJoinsInFlightPerAddress: 32,
		GatewayJoinStreams: 4, GatewayJoinWindowBytes: 64 << 10, GatewayJoinReadTimeout: 10 * time.Second,
		GatewayJoinRate: 5, GatewayJoinBurst: 50,
	}
	if c.Limits != want {
		t.Errorf("limits = %+v, want %+v", c.Limits, want)
	}
}

func TestLimitsFromFileAndEnv(t *testing.T) {
	t.Parallel()
	c, err := load(t, "limits:\n  requestBytes: 1048576\n  readTimeout: 30s\n  daemonEventBytes: 4096\n",
		withSecret("BETTER_COMPUTE_LIMITS_DAEMON_HELLO_BYTES=2048", "BETTER_COMPUTE_LIMITS_IDLE_TIMEOUT=90s"))
	if err != nil {
		t.Fatal(err)
	}
	l := c.Limits
	if l.RequestBytes != 1<<20 || l.ReadTimeout != 30*time.Second || l.DaemonEventBytes != 4096 ||
		l.DaemonHelloBytes != 2048 || l.IdleTimeout != 90*time.Second || l.HeaderBytes != 64<<10 {
		t.Errorf("limits = %+v", l)
	}
	vars := EnvVars()
	for _, name := range []string{
		"BETTER_COMPUTE_LIMITS_REQUEST_BYTES", "BETTER_COMPUTE_LIMITS_HEADER_BYTES",
		"BETTER_COMPUTE_LIMITS_READ_HEADER_TIMEOUT", "BETTER_COMPUTE_LIMITS_READ_TIMEOUT",
		"BETTER_COMPUTE_LIMITS_IDLE_TIMEOUT", "BETTER_COMPUTE_LIMITS_DAEMON_REQUEST_BYTES",
		"BETTER_COMPUTE_LIMITS_DAEMON_HELLO_BYTES", "BETTER_COMPUTE_LIMITS_DAEMON_RESULT_BYTES",
		"BETTER_COMPUTE_LIMITS_DAEMON_EVENT_BYTES", "BETTER_COMPUTE_LIMITS_GATEWAY_SESSIONS",
	} {
		if !slices.Contains(vars, name) {
			t.Errorf("EnvVars() lacks %s", name)
		}
	}
}

func TestLimitsValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		env        []string
		key, want  string
	}{
		{"request zero", "limits: {requestBytes: 0}", nil, "limits.requestBytes", "must be from 1024 to 268435456 bytes, got 0"},
		{"sessions zero", "limits: {gatewaySessions: 0}", nil, "limits.gatewaySessions", "must be from 1 to 1000000, got 0"},
		{"request huge", "", []string{"BETTER_COMPUTE_LIMITS_REQUEST_BYTES=1073741824"}, "limits.requestBytes", "got 1073741824"},
		{"request not a number", "", []string{"BETTER_COMPUTE_LIMITS_REQUEST_BYTES=4MiB"}, "limits.requestBytes", "must be an integer"},
		{"header small", "limits: {headerBytes: 100}", nil, "limits.headerBytes", "must be from 4096"},
		{"daemon request negative", "limits: {daemonRequestBytes: -1}", nil, "limits.daemonRequestBytes", "must be from 1024"},
		{"hello zero", "limits: {daemonHelloBytes: 0}", nil, "limits.daemonHelloBytes", "must be from 1024"},
		{"result zero", "limits: {daemonResultBytes: 0}", nil, "limits.daemonResultBytes", "must be from 1024"},
		{"event zero", "limits: {daemonEventBytes: 0}", nil, "limits.daemonEventBytes", "must be from 1024"},
		{"read header zero", "limits: {readHeaderTimeout: 0s}", nil, "limits.readHeaderTimeout", "must be a positive duration"},
		{"idle too long", "", []string{"BETTER_COMPUTE_LIMITS_IDLE_TIMEOUT=2h"}, "limits.idleTimeout", "at most 1h0m0s"},
		{"read timeout not a duration", "limits: {readTimeout: soon}", nil, "limits.readTimeout", "must be a duration"},
		{"read below read header", "limits: {readTimeout: 5s}", nil, "limits.readTimeout", "at least limits.readHeaderTimeout"},
		{"anonymous conns zero", "limits: {gatewayAnonymousConns: 0}", nil, "limits.gatewayAnonymousConns", "must be from 1"},
		{"join window below HTTP/2's", "limits: {gatewayJoinWindowBytes: 1024}", nil, "limits.gatewayJoinWindowBytes", "must be from 65535"},
		{"join read timeout zero", "limits: {gatewayJoinReadTimeout: 0s}", nil, "limits.gatewayJoinReadTimeout", "must be a positive duration"},
		{"join rate zero", "limits: {gatewayJoinRate: 0}", nil, "limits.gatewayJoinRate", "must be a positive number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, withSecret(tc.env...))
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			if keys := problemKeys(t, err); !slices.Equal(keys, []string{tc.key}) {
				t.Errorf("problem keys %q, want [%q]; error: %v", keys, tc.key, err)
			}
			if !strings.Contains(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q and %q", err, tc.key+": ", tc.want)
			}
		})
	}
}

// TestExampleDocumentsLimits: the example configuration loads, and its limits section shows the
// defaults.
func TestExampleDocumentsLimits(t *testing.T) {
	t.Parallel()
	c, err := Load("../../better-compute.example.yaml", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://bc@db.internal/bc"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits != Default().Limits {
		t.Errorf("example limits %+v, defaults %+v", c.Limits, Default().Limits)
	}
}
