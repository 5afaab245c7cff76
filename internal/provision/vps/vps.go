// Package vps is the "ec2" provider: machines that are EC2 instances (or instances of an
// EC2-compatible endpoint), made through the AWS SDK for Go v2. An instance boots with cloud-init
// user data that installs bcd from the class's signed release with deploy/install.sh (signature,
// then checksum, verified on the instance) and joins the gateway with the machine's single-use
// token, pinning the deployment's root CA.
//
// Create is idempotent twice over: it first looks for an instance tagged with the machine's id
// (terminated ones included, as EC2 answers a known client token with its instance whatever its
// state), and launches with the machine's id as EC2's ClientToken, so two Creates racing each
// other still make one instance on EC2. (moto, which the tests run against, records client tokens
// but does not honour them; the tag look-up is what keeps Create idempotent there.) The tags go
// on the instance and its volumes at launch, in the same call, so no instance exists untagged.
package vps

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/release"
)

// Kind is the provider's kind in the provision module's configuration and in classes.
const Kind = "ec2"

// Factory makes an ec2 class's provider from its parameters (Params) and credentials
// (Credentials, JSON). It checks both (the endpoint against egress) and builds the EC2 client,
// but sends no request, since machineClasses/create calls it. Errors never quote the
// credentials. The client sends every request through egress.Client: no private addresses
// unless the deployment allows them, checked when dialling; no redirects; bounded answers.
func Factory(params json.RawMessage, creds []byte, egress provision.Egress) (provision.Provider, error) {
	p, key, err := parseParams(params, egress)
	if err != nil {
		return nil, err
	}
	c, err := parseCredentials(creds)
	if err != nil {
		return nil, err
	}
	opts := ec2.Options{
		Region:      p.Region,
		HTTPClient:  egress.Client(provision.ClientOptions{Timeout: requestTimeout, MaxAnswerBytes: maxAnswerBytes}),
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, c.SessionToken)),
	}
	if p.Endpoint != "" {
		opts.BaseEndpoint = aws.String(p.Endpoint)
	}
	return &provider{params: p, key: key, ec2: ec2.New(opts)}, nil
}

// Bounds of the requests to EC2.
const (
	// maxAnswerBytes bounds each answer: a page of DescribeInstances (up to 1,000 instances)
	// is a few megabytes of XML.
	maxAnswerBytes = 32 << 20
	// requestTimeout bounds each request, answer included.
	requestTimeout = time.Minute
)

// provider is an ec2 class's provider.
type provider struct {
	params Params
	key    *release.PublicKey
	ec2    *ec2.Client
}

var _ provision.Provider = (*provider)(nil)

// String names the provider without its credentials, should it be logged.
func (p *provider) String() string {
	return fmt.Sprintf("ec2 provider (%s, %s)", p.params.Region, p.params.InstanceType)
}
