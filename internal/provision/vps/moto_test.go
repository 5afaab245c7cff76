package vps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/release"
)

// emulatorsVenv is where scripts/setup installs the emulators, relative to the repository.
const emulatorsVenv = ".venv-emulators"

// motoServer finds moto's server: in the repository's emulator virtualenv, else on PATH. A
// missing emulator fails the test, so that a machine without it does not pass by testing nothing.
func motoServer(t *testing.T) string {
	t.Helper()
	if dir, err := filepath.Abs("../../.."); err == nil {
		if p := filepath.Join(dir, emulatorsVenv, "bin", "moto_server"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("moto_server"); err == nil {
		return p
	}
	t.Fatalf("moto_server not found (in %s/bin or on PATH): the ec2 provider's tests run against moto's EC2 server; run scripts/setup, which installs moto[ec2,server] from scripts/emulators-requirements.txt into %s", emulatorsVenv, emulatorsVenv)
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// startMoto runs a moto EC2 server on a loopback port of its own until the test ends and returns
// its URL.
func startMoto(t *testing.T) string {
	t.Helper()
	bin := motoServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: &logs}, &lockedWriter{w: &logs}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start moto_server: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: time.Second}
	poll.Until(t, 60*time.Second, "moto_server to answer on "+url, func() bool {
		select {
		case <-exited:
			t.Fatalf("moto_server exited: %v\n%s", waitErr, logs.String())
		default:
		}
		res, err := client.Get(url + "/moto-api/")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return true
	}, poll.Every(100*time.Millisecond))
	return url
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// testKey is a release public key for the classes' parameters.
func testKey(t *testing.T) string {
	t.Helper()
	pub, _, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return pub.String()
}

// testParams are a class's parameters against moto at endpoint.
func testParams(t *testing.T, endpoint string) Params {
	t.Helper()
	return Params{
		Region: "us-east-1", Endpoint: endpoint, ImageID: "ami-0123456789abcdef0", InstanceType: "t3.micro",
		Release: Release{URL: "https://releases.example.com/bc", Version: "v1.2.3", PublicKey: testKey(t)},
		Tags:    map[string]string{"team": "infra"},
	}
}

// testEgress allows the loopback moto of the tests.
var testEgress = provision.Egress{AllowPrivate: true}

// testCredentials are moto's: any access key works.
var testCredentials = []byte(`{"accessKeyId": "AKIAIOSFODNN7EXAMPLE", "secretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`)

// newProvider makes a provider of params through the Factory.
func newProvider(t *testing.T, p Params) *provider {
	t.Helper()
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	prov, err := Factory(raw, testCredentials, testEgress)
	if err != nil {
		t.Fatal(err)
	}
	return prov.(*provider)
}

// testRequest is a CreateRequest for machine id in deployment.
func testRequest(id, deployment string) provision.CreateRequest {
	return provision.CreateRequest{
		ClientToken: id, Name: "m-" + id[:8],
		Tags: map[string]string{provision.TagMachine: id, provision.TagDeployment: deployment},
		Join: provision.Join{Token: "bcj_abc_def", Gateway: "127.0.0.1:7443", RootCA: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")},
	}
}

// userDataOf reads an instance's user data back from EC2, as the instance would.
func userDataOf(ctx context.Context, p *provider, instanceID string) ([]byte, error) {
	out, err := p.ec2.DescribeInstanceAttribute(ctx, describeUserData(instanceID))
	if err != nil {
		return nil, fmt.Errorf("read instance %s's user data: %w", instanceID, err)
	}
	if out.UserData == nil || out.UserData.Value == nil {
		return nil, fmt.Errorf("instance %s has no user data", instanceID)
	}
	return decodeBase64String(*out.UserData.Value)
}
