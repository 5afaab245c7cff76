package vps

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestFactoryRefuses: bad or unknown parameters and bad credentials are refused, and no error
// quotes the secret.
func TestFactoryRefuses(t *testing.T) {
	t.Parallel()
	good := testParams(t, "")
	mutate := func(f func(p *Params)) json.RawMessage {
		p := good
		p.Tags = map[string]string{}
		f(&p)
		raw, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for name, params := range map[string]json.RawMessage{
		"unknown key":   json.RawMessage(`{"region": "us-east-1", "bogus": 1}`),
		"region":        mutate(func(p *Params) { p.Region = "Mars" }),
		"endpoint":      mutate(func(p *Params) { p.Endpoint = "ftp://x" }),
		"endpoint user": mutate(func(p *Params) { p.Endpoint = "https://u:p@x" }),
		"image":         mutate(func(p *Params) { p.ImageID = "ubuntu" }),
		"instance type": mutate(func(p *Params) { p.InstanceType = "big" }),
		"subnet":        mutate(func(p *Params) { p.SubnetID = "net-1" }),
		"groups":        mutate(func(p *Params) { p.SecurityGroupIDs = []string{"sg-1"} }),
		"too many groups": mutate(func(p *Params) {
			for range 6 {
				p.SecurityGroupIDs = append(p.SecurityGroupIDs, "sg-0123456789abcdef0")
			}
		}),
		"key name":        mutate(func(p *Params) { p.KeyName = "a\nb" }),
		"release url":     mutate(func(p *Params) { p.Release.URL = "https://x/$(reboot)" }),
		"release version": mutate(func(p *Params) { p.Release.Version = "../v1" }),
		"release key":     mutate(func(p *Params) { p.Release.PublicKey = "not a key" }),
		"reserved tag":    mutate(func(p *Params) { p.Tags["better-compute/machine"] = "x" }),
		"aws tag":         mutate(func(p *Params) { p.Tags["aws:x"] = "x" }),
		"name tag":        mutate(func(p *Params) { p.Tags["Name"] = "x" }),
	} {
		if _, err := Factory(params, testCredentials, testEgress); err == nil {
			t.Errorf("%s: accepted %s", name, params)
		}
	}
	ok := mutate(func(*Params) {})
	if _, err := Factory(ok, testCredentials, testEgress); err != nil {
		t.Fatalf("good parameters refused: %v", err)
	}
	for _, creds := range []string{``, `{}`, `{"accessKeyId": "AKIAIOSFODNN7EXAMPLE"}`, `{"accessKeyId": "x", "secretAccessKey": "s3cr3t-VALUE"}`, `s3cr3t-VALUE`, `{"secretAccessKey": "s3cr3t-VALUE", "extra": 1}`} {
		_, err := Factory(ok, []byte(creds), testEgress)
		if err == nil {
			t.Errorf("credentials %s: accepted", creds)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("credentials %s: the error quotes the secret: %v", creds, err)
		}
	}
	p, err := Factory(ok, testCredentials, testEgress)
	if err != nil {
		t.Fatal(err)
	}
	if s := p.(*provider).String(); strings.Contains(s, "EXAMPLEKEY") || strings.Contains(s, "AKIA") {
		t.Fatalf("String shows the credentials: %s", s)
	}
}

// TestUserDataCarriesValuesAsData: a gateway or token with shell and YAML syntax in it stays
// one argument or file of the boot, never shell text, and the user data fits EC2's limit.
func TestUserDataCarriesValuesAsData(t *testing.T) {
	t.Parallel()
	params := testParams(t, "")
	key, err := checkRelease(params.Release)
	if err != nil {
		t.Fatal(err)
	}
	req := testRequest(uuid.NewString(), "test.local")
	req.Join.Gateway = "gw.example:443 --ca-file /etc/passwd\n- [reboot] $(reboot) `reboot` '\""
	req.Join.Token = "bcj_x_y\n  - evil: true\"; reboot"
	ud, err := userData(params, key, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(ud) > maxUserData {
		t.Fatalf("user data is %d bytes, more than %d", len(ud), maxUserData)
	}
	b, err := parseBoot(ud)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBoot(b, params, req); err != nil {
		t.Fatal(err)
	}
	if b.flag("--ca-file") != caPath || strings.Contains(b.command[2], "reboot") {
		t.Fatalf("the values leaked into the command: %q", b.command)
	}
}
