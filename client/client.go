// Package client is the Go SDK of the Better Compute API: one typed Connect client for every
// service (generated in gen/go), behind an interceptor that sends the X-Better-Compute header and
// the API key, and retries the calls that are safe to retry.
//
//	c := client.New("https://compute.example.com/api", client.WithAPIKey(os.Getenv("BETTER_COMPUTE_API_KEY")))
//	res, err := c.Nodes.List(ctx, &nodesv1.ListRequest{})
//
// Errors are *connect.Error values: connect.CodeOf(err) is connect.CodeUnauthenticated for a
// missing or wrong key, connect.CodeNotFound for an unknown id, and so on.
package client

import (
	"context"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1/auditv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/events/v1/eventsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1/gpusv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1/iamv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1/remediationsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1/reservationsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1/secretsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/system/v1/systemv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1/tunnelsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1/usagev1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1/webhooksv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1/workflowsv1connect"
)

// Header names the client sends.
const (
	// ClientHeader is sent as "X-Better-Compute: 1" on every call (the API's CSRF guard).
	ClientHeader = "X-Better-Compute"
	// IdempotencyKeyHeader carries the key that makes a retried create return the stored
	// response instead of acting twice.
	IdempotencyKeyHeader = "Idempotency-Key"
)

// Client holds a typed client for every API service. Its fields are safe for concurrent use.
type Client struct {
	System       systemv1connect.SystemServiceClient
	IAM          iamv1connect.IamServiceClient
	Auth         authv1connect.AuthServiceClient
	Audit        auditv1connect.AuditServiceClient
	Events       eventsv1connect.EventsServiceClient
	Webhooks     webhooksv1connect.WebhooksServiceClient
	JoinTokens   jointokensv1connect.JoinTokensServiceClient
	Nodes        nodesv1connect.NodesServiceClient
	GPUs         gpusv1connect.GpusServiceClient
	Commands     commandsv1connect.CommandsServiceClient
	Pools        poolsv1connect.PoolsServiceClient
	Leases       leasesv1connect.LeasesServiceClient
	Reservations reservationsv1connect.ReservationsServiceClient
	Usage        usagev1connect.UsageServiceClient
	Secrets      secretsv1connect.SecretsServiceClient
	Tunnels      tunnelsv1connect.TunnelsServiceClient
	Workflows    workflowsv1connect.WorkflowsServiceClient
	// Remediations are the GPU and node repairs (bettercompute.remediations.v1).
	Remediations remediationsv1connect.RemediationsServiceClient

	// What Tunnel needs to open the WebSocket itself: the key and the HTTP client of the calls.
	apiKey     string
	httpClient connect.HTTPClient
}

// Option configures New.
type Option func(*options)

type options struct {
	apiKey     string
	httpClient connect.HTTPClient
	retry      RetryPolicy
	connect    []connect.ClientOption
	sleep      func(context.Context, time.Duration) error // nil: a timer (tests wait without one)
}

// WithAPIKey sends "Authorization: Bearer <key>" on every call. Without it only public methods
// (system/info) answer.
func WithAPIKey(key string) Option { return func(o *options) { o.apiKey = key } }

// WithHTTPClient makes the calls with c instead of a default client with a 60-second timeout.
func WithHTTPClient(c connect.HTTPClient) Option { return func(o *options) { o.httpClient = c } }

// WithRetry replaces DefaultRetryPolicy; RetryPolicy{MaxAttempts: 1} turns retries off.
func WithRetry(p RetryPolicy) Option { return func(o *options) { o.retry = p } }

// WithConnectOptions passes options to every generated client, for example
// connect.WithGRPC() or connect.WithInterceptors(...) (run after the client's own).
func WithConnectOptions(opts ...connect.ClientOption) Option {
	return func(o *options) { o.connect = append(o.connect, opts...) }
}

// defaultHTTPClient is the HTTP client of clients made without WithHTTPClient.
func defaultHTTPClient() *http.Client { return &http.Client{Timeout: 60 * time.Second} }

// New returns clients for the API at baseURL, the URL including the base path, for example
// "https://compute.example.com/api" (what `better-compute dev` prints as "API:").
func New(baseURL string, opts ...Option) *Client {
	o := options{retry: DefaultRetryPolicy}
	for _, opt := range opts {
		opt(&o)
	}
	if o.httpClient == nil {
		o.httpClient = defaultHTTPClient()
	}
	baseURL = strings.TrimSuffix(baseURL, "/")
	copts := o.connectOptions()
	h := o.httpClient
	return &Client{
		System:       systemv1connect.NewSystemServiceClient(h, baseURL, copts...),
		IAM:          iamv1connect.NewIamServiceClient(h, baseURL, copts...),
		Auth:         authv1connect.NewAuthServiceClient(h, baseURL, copts...),
		Audit:        auditv1connect.NewAuditServiceClient(h, baseURL, copts...),
		Events:       eventsv1connect.NewEventsServiceClient(h, baseURL, copts...),
		Webhooks:     webhooksv1connect.NewWebhooksServiceClient(h, baseURL, copts...),
		JoinTokens:   jointokensv1connect.NewJoinTokensServiceClient(h, baseURL, copts...),
		Nodes:        nodesv1connect.NewNodesServiceClient(h, baseURL, copts...),
		GPUs:         gpusv1connect.NewGpusServiceClient(h, baseURL, copts...),
		Commands:     commandsv1connect.NewCommandsServiceClient(h, baseURL, copts...),
		Pools:        poolsv1connect.NewPoolsServiceClient(h, baseURL, copts...),
		Leases:       leasesv1connect.NewLeasesServiceClient(h, baseURL, copts...),
		Reservations: reservationsv1connect.NewReservationsServiceClient(h, baseURL, copts...),
		Usage:        usagev1connect.NewUsageServiceClient(h, baseURL, copts...),
		Secrets:      secretsv1connect.NewSecretsServiceClient(h, baseURL, copts...),
		Tunnels:      tunnelsv1connect.NewTunnelsServiceClient(h, baseURL, copts...),
		Workflows:    workflowsv1connect.NewWorkflowsServiceClient(h, baseURL, copts...),
		Remediations: remediationsv1connect.NewRemediationsServiceClient(h, baseURL, copts...),
		apiKey:       o.apiKey,
		httpClient:   h,
	}
}

// ConnectOptions are the Connect client options this package's clients are made with — the API
// key, the X-Better-Compute header, the retries of calls safe to retry — for the generated client
// of a module's service, which this package does not know:
//
//	greetings := hellov1connect.NewHelloServiceClient(http.DefaultClient, url, client.ConnectOptions(client.WithAPIKey(key))...)
func ConnectOptions(opts ...Option) []connect.ClientOption {
	o := options{retry: DefaultRetryPolicy}
	for _, opt := range opts {
		opt(&o)
	}
	return o.connectOptions()
}

func (o options) connectOptions() []connect.ClientOption {
	return append([]connect.ClientOption{connect.WithInterceptors(newInterceptor(o))}, o.connect...)
}
