package vps

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/release"
)

// Params are an ec2 class's parameters (unknown keys are refused).
type Params struct {
	// Region is the AWS region the instances run in, e.g. eu-west-1 (required).
	Region string `json:"region"`
	// Endpoint overrides the EC2 endpoint (an http(s) URL): a private endpoint, or moto in
	// tests. Empty: the region's public endpoint.
	Endpoint string `json:"endpoint,omitempty"`
	// ImageID is the AMI the instances boot (required); it must run cloud-init and have
	// minisign in its package repositories (Debian 12+, Ubuntu 22.04+).
	ImageID string `json:"imageId"`
	// InstanceType is the instance type, e.g. t3.medium (required).
	InstanceType string `json:"instanceType"`
	// SubnetID places the instances in a subnet; the default VPC's default subnet when empty.
	SubnetID string `json:"subnetId,omitempty"`
	// SecurityGroupIDs are the instances' security groups (at most 5); the VPC's default group
	// when empty.
	SecurityGroupIDs []string `json:"securityGroupIds,omitempty"`
	// KeyName is an EC2 key pair to let an operator in over SSH; none when empty.
	KeyName string `json:"keyName,omitempty"`
	// Release is the signed release the instances install bcd from (required).
	Release Release `json:"release"`
	// Tags are extra tags on the instances (at most 20; not aws:… or better-compute/…).
	Tags map[string]string `json:"tags,omitempty"`
}

// Release is where an instance gets bcd: a release made by `better-compute release build`,
// installed by deploy/install.sh only when its signature verifies with PublicKey.
type Release struct {
	// URL is the release base URL (the release is URL/VERSION/).
	URL string `json:"url"`
	// Version is the release to install, e.g. v1.2.3.
	Version string `json:"version"`
	// PublicKey is the release signing key: a minisign.pub file's content or its base64 line.
	PublicKey string `json:"publicKey"`
}

// Credentials are an ec2 class's credentials: an IAM access key allowed ec2:RunInstances,
// DescribeInstances, StartInstances, StopInstances, RebootInstances, TerminateInstances and
// CreateTags (on launch).
type Credentials struct {
	AccessKeyID     string `json:"accessKeyId"`
	SecretAccessKey string `json:"secretAccessKey"`
	// SessionToken goes with temporary credentials; optional.
	SessionToken string `json:"sessionToken,omitempty"`
}

// Limits on parameters.
const (
	maxSecurityGroups = 5
	maxExtraTags      = 20
)

var (
	regionPattern       = regexp.MustCompile(`^[a-z]{2}(-[a-z0-9]+){1,3}-[0-9]{1,2}$`)
	imagePattern        = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	instanceTypePattern = regexp.MustCompile(`^[a-z0-9-]{1,24}\.[a-z0-9-]{1,16}$`)
	subnetPattern       = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	groupPattern        = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	keyNamePattern      = regexp.MustCompile(`^[A-Za-z0-9 ._:/()#,@\[\]+=&;{}!$*-]{1,255}$`)
	accessKeyPattern    = regexp.MustCompile(`^[A-Z0-9]{16,128}$`)
	// releaseURLChars are what install.sh lets a release URL carry (it goes on bcd's unit).
	releaseURLChars = regexp.MustCompile(`^[A-Za-z0-9._~:/@+=,%-]{1,512}$`)
)

// parseParams decodes and checks a class's parameters; the endpoint must pass egress's checks.
func parseParams(raw json.RawMessage, egress provision.Egress) (Params, *release.PublicKey, error) {
	var p Params
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return Params{}, nil, fmt.Errorf("ec2 parameters: %w", err)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !regionPattern.MatchString(p.Region) {
		bad("region must be an AWS region, for example eu-west-1")
	}
	if p.Endpoint != "" {
		if u, err := url.Parse(p.Endpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || len(p.Endpoint) > 512 {
			bad("endpoint must be an http(s) URL without credentials, for example https://ec2.eu-west-1.amazonaws.com")
		} else if err := egress.CheckEndpoint(p.Endpoint); err != nil {
			errs = append(errs, &provision.FieldError{Field: "endpoint", Err: err})
		}
	}
	if !imagePattern.MatchString(p.ImageID) {
		bad("imageId must be an AMI id, for example ami-0123456789abcdef0")
	}
	if !instanceTypePattern.MatchString(p.InstanceType) {
		bad("instanceType must be an instance type, for example t3.medium")
	}
	if p.SubnetID != "" && !subnetPattern.MatchString(p.SubnetID) {
		bad("subnetId must be a subnet id, for example subnet-0123456789abcdef0")
	}
	if len(p.SecurityGroupIDs) > maxSecurityGroups {
		bad("securityGroupIds: at most %d", maxSecurityGroups)
	}
	for _, g := range p.SecurityGroupIDs {
		if !groupPattern.MatchString(g) {
			bad("securityGroupIds: %q is not a security group id (sg-…)", g)
		}
	}
	if p.KeyName != "" && !keyNamePattern.MatchString(p.KeyName) {
		bad("keyName must be an EC2 key pair's name")
	}
	key, err := checkRelease(p.Release)
	if err != nil {
		errs = append(errs, err)
	}
	if len(p.Tags) > maxExtraTags {
		bad("tags: at most %d", maxExtraTags)
	}
	for k, v := range p.Tags {
		lk := strings.ToLower(k)
		switch {
		case k == "" || len(k) > 128 || len(v) > 256:
			bad("tags: keys are 1 to 128 characters, values at most 256")
		case strings.HasPrefix(lk, "aws:") || strings.HasPrefix(lk, "better-compute/") || k == "Name":
			bad("tags: %q is reserved (aws:…, better-compute/… and Name are set by the provider)", k)
		}
	}
	if len(errs) > 0 {
		return Params{}, nil, fmt.Errorf("ec2 parameters: %w", errors.Join(errs...))
	}
	return p, key, nil
}

func checkRelease(r Release) (*release.PublicKey, error) {
	var errs []error
	if u, err := url.Parse(r.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !releaseURLChars.MatchString(r.URL) {
		errs = append(errs, errors.New("release.url must be the http(s) base URL of a release, without spaces or quotes"))
	}
	if err := release.ValidateVersion(r.Version); err != nil {
		errs = append(errs, fmt.Errorf("release.version: %w", err))
	}
	key, err := release.ParsePublicKey([]byte(r.PublicKey))
	if err != nil {
		errs = append(errs, fmt.Errorf("release.publicKey must be the release's minisign public key: %w", err))
	}
	return key, errors.Join(errs...)
}

// parseCredentials decodes a class's credentials. Errors never quote them.
func parseCredentials(raw []byte) (Credentials, error) {
	if len(raw) == 0 {
		return Credentials{}, errors.New("ec2 classes need credentials: {\"accessKeyId\": …, \"secretAccessKey\": …}")
	}
	var c Credentials
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Credentials{}, errors.New("ec2 credentials: want a JSON object with accessKeyId, secretAccessKey and optionally sessionToken")
	}
	if !accessKeyPattern.MatchString(c.AccessKeyID) || c.SecretAccessKey == "" || len(c.SecretAccessKey) > 256 || len(c.SessionToken) > 4096 {
		return Credentials{}, errors.New("ec2 credentials: accessKeyId must be an access key id (AKIA…) and secretAccessKey its secret")
	}
	return c, nil
}

// checkRequest reports whether req carries what an instance needs.
func checkRequest(req provision.CreateRequest) error {
	switch {
	case req.ClientToken == "" || len(req.ClientToken) > 64:
		return errors.New("ec2: a client token of at most 64 characters is required")
	case req.Join.Token == "" || req.Join.Gateway == "" || len(req.Join.RootCA) == 0:
		return errors.New("ec2: the join token, the gateway and the root CA are required")
	}
	return nil
}
