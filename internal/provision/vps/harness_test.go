package vps

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"go.yaml.in/yaml/v3"

	"github.com/better-compute/better-compute/deploy"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/provision"
)

func describeUserData(id string) *ec2.DescribeInstanceAttributeInput {
	return &ec2.DescribeInstanceAttributeInput{InstanceId: aws.String(id), Attribute: types.InstanceAttributeNameUserData}
}

func decodeBase64String(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("user data: %w", err)
	}
	return b, nil
}

// boot is what an instance's cloud-init would do with its user data: the files it writes and
// the install.sh command it runs.
type boot struct {
	hostname string
	packages []string
	files    map[string][]byte
	// command is the runcmd entry; args are install.sh's arguments (after sh -c SCRIPT $0).
	command, args []string
}

// flag is install.sh's value for the option.
func (b boot) flag(name string) string {
	if i := slices.Index(b.args, name); i >= 0 && i+1 < len(b.args) {
		return b.args[i+1]
	}
	return ""
}

// token, gateway and rootCA are what `bcd join` gets from install.sh: the token from the file the
// script reads into BCD_JOIN_TOKEN, the gateway and CA file from the arguments.
func (b boot) token() string   { return string(b.files[tokenPath]) }
func (b boot) gateway() string { return b.flag("--gateway") }
func (b boot) rootCA() []byte  { return b.files[b.flag("--ca-file")] }

// parseBoot reads user data as cloud-init does (#cloud-config YAML, write_files with their
// encodings, runcmd).
func parseBoot(ud []byte) (boot, error) {
	if !bytes.HasPrefix(ud, []byte("#cloud-config\n")) {
		return boot{}, fmt.Errorf("user data does not start with #cloud-config: %.40q", ud)
	}
	var cfg cloudConfig
	dec := yaml.NewDecoder(bytes.NewReader(ud))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return boot{}, fmt.Errorf("user data: %w", err)
	}
	b := boot{hostname: cfg.Hostname, packages: cfg.Packages, files: map[string][]byte{}}
	for _, f := range cfg.WriteFiles {
		var content []byte
		switch f.Encoding {
		case "":
			content = []byte(f.Content)
		case "gz+b64":
			z, err := base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return boot{}, fmt.Errorf("%s: %w", f.Path, err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(z))
			if err != nil {
				return boot{}, fmt.Errorf("%s: %w", f.Path, err)
			}
			if content, err = io.ReadAll(zr); err != nil {
				return boot{}, fmt.Errorf("%s: %w", f.Path, err)
			}
		default:
			return boot{}, fmt.Errorf("%s: unexpected encoding %q", f.Path, f.Encoding)
		}
		b.files[f.Path] = content
	}
	if len(cfg.RunCmd) != 1 || len(cfg.RunCmd[0]) < 4 || cfg.RunCmd[0][0] != "sh" || cfg.RunCmd[0][1] != "-c" {
		return boot{}, fmt.Errorf("runcmd %q: want one sh -c command", cfg.RunCmd)
	}
	b.command, b.args = cfg.RunCmd[0], cfg.RunCmd[0][4:]
	return b, nil
}

// checkBoot checks that b installs bcd with install.sh from the class's signed release and joins
// with the request's token, gateway and root CA.
func checkBoot(b boot, p Params, req provision.CreateRequest) error {
	var errs []string
	want := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Sprintf(format, args...))
		}
	}
	want(bytes.Equal(b.files[installPath], deploy.InstallScript), "install.sh is not deploy/install.sh")
	want(bytes.Equal(b.files[unitPath], deploy.Unit), "the unit is not deploy/bcd.service")
	want(slices.Contains(b.packages, "minisign"), "minisign is not installed (install.sh verifies the release with it)")
	want(strings.Contains(b.command[2], "BCD_JOIN_TOKEN=$(cat "+tokenPath+")") && strings.Contains(b.command[2], "sh "+installPath+` "$@"`), "the command does not run install.sh with the token: %q", b.command[2])
	want(b.flag("--release-url") == p.Release.URL && b.flag("--version") == p.Release.Version, "release %q %q", b.flag("--release-url"), b.flag("--version"))
	want(strings.Contains(string(b.files[b.flag("--pubkey")]), p.Release.PublicKey), "the release key file does not hold the class's key")
	want(b.flag("--unit") == unitPath, "--unit %q", b.flag("--unit"))
	want(b.token() == req.Join.Token, "token %q, want %q", b.token(), req.Join.Token)
	want(b.gateway() == req.Join.Gateway, "gateway %q, want %q", b.gateway(), req.Join.Gateway)
	want(bytes.Equal(b.rootCA(), req.Join.RootCA), "the root CA differs")
	want(b.hostname == req.Name, "hostname %q, want %q", b.hostname, req.Name)
	want(!slices.Contains(b.args, req.Join.Token), "the token is on a command line")
	if len(errs) > 0 {
		return fmt.Errorf("user data: %s", strings.Join(errs, "; "))
	}
	return nil
}

// instances plays the booted operating system of the instances at moto: each instance of the
// deployment that runs boots once, reading its user data, and joins with a FakeDaemon that runs
// until the instance is terminated or the test ends.
type instances struct {
	t      *testing.T
	p      *provider
	ctx    context.Context
	wg     sync.WaitGroup
	mu     sync.Mutex
	booted map[string]context.CancelFunc
}

func newInstances(t *testing.T, p *provider) *instances {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &instances{t: t, p: p, ctx: ctx, booted: map[string]context.CancelFunc{}}
	t.Cleanup(func() { cancel(); h.wg.Wait() })
	return h
}

// tick boots the running instances that have not booted and stops the daemons of the
// terminated ones.
func (h *instances) tick() error {
	ms, err := h.p.describe(h.ctx, "list instances", &ec2.DescribeInstancesInput{})
	if err != nil {
		return err
	}
	for _, m := range ms {
		h.mu.Lock()
		stop, seen := h.booted[m.ProviderID]
		h.mu.Unlock()
		switch {
		case m.State == provision.ProviderGone && seen && stop != nil:
			stop()
			h.mu.Lock()
			h.booted[m.ProviderID] = nil
			h.mu.Unlock()
		case m.State == provision.ProviderRunning && !seen:
			if err := h.boot(m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *instances) boot(m provision.Machine) error {
	ud, err := userDataOf(h.ctx, h.p, m.ProviderID)
	if err != nil {
		return err
	}
	b, err := parseBoot(ud)
	if err != nil {
		return fmt.Errorf("instance %s: %w", m.ProviderID, err)
	}
	fake, err := daemon.JoinFake(h.ctx, b.rootCA(), b.token(), b.hostname, daemon.FakeOptions{
		Dialer: daemon.Dialer{Gateway: b.gateway()}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return fmt.Errorf("instance %s: join: %w", m.ProviderID, err)
	}
	ctx, stop := context.WithCancel(h.ctx)
	h.mu.Lock()
	h.booted[m.ProviderID] = stop
	h.mu.Unlock()
	h.wg.Go(func() {
		if err := fake.Run(ctx); err != nil && ctx.Err() == nil {
			h.t.Errorf("instance %s: daemon: %v", m.ProviderID, err)
		}
	})
	return nil
}

// run ticks every 100ms until the test ends.
func (h *instances) run() {
	h.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-h.ctx.Done():
				return
			case <-tick.C:
			}
			if err := h.tick(); err != nil && h.ctx.Err() == nil {
				h.t.Errorf("instance harness: %v", err)
				return
			}
		}
	})
}
