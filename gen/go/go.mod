// The generated Go code of the API, the daemon protocol and the gateway's control API: a module
// of its own so that the Go SDK (../../client) and the control plane share it without the SDK
// depending on the control plane's module.
module github.com/better-compute/better-compute/gen/go

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	google.golang.org/protobuf v1.36.12
)
