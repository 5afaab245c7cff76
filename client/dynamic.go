package client

import (
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// NewMethodClient returns a client for the unary method md of the API at baseURL whose requests
// and responses are dynamicpb messages of md's input and output: how a program that knows the API
// only from its descriptors (the CLI) calls it, with the same headers, API key and retries as New.
func NewMethodClient(baseURL string, md protoreflect.MethodDescriptor, opts ...Option) *connect.Client[dynamicpb.Message, dynamicpb.Message] {
	o := options{retry: DefaultRetryPolicy}
	for _, opt := range opts {
		opt(&o)
	}
	if o.httpClient == nil {
		o.httpClient = defaultHTTPClient()
	}
	copts := []connect.ClientOption{
		connect.WithSchema(md),
		connect.WithIdempotency(idempotencyOf(md)),
		connect.WithResponseInitializer(func(_ connect.Spec, msg any) error {
			if dm, ok := msg.(*dynamicpb.Message); ok {
				*dm = *dynamicpb.NewMessage(md.Output())
			}
			return nil
		}),
		connect.WithInterceptors(newInterceptor(o)),
	}
	copts = append(copts, o.connect...)
	url := strings.TrimSuffix(baseURL, "/") + "/" + string(md.Parent().FullName()) + "/" + string(md.Name())
	return connect.NewClient[dynamicpb.Message, dynamicpb.Message](o.httpClient, url, copts...)
}

// idempotencyOf is the idempotency_level the generated clients pass as connect.WithIdempotency.
func idempotencyOf(md protoreflect.MethodDescriptor) connect.IdempotencyLevel {
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok || opts == nil {
		return connect.IdempotencyUnknown
	}
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
		return connect.IdempotencyNoSideEffects
	case descriptorpb.MethodOptions_IDEMPOTENT:
		return connect.IdempotencyIdempotent
	default:
		return connect.IdempotencyUnknown
	}
}
