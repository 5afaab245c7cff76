// The Go SDK: a module of its own, as Nomad's api, so that its users get the API's client, the
// generated messages and the tunnel wire, and nothing of the control plane (no PostgreSQL
// driver, NATS or cloud SDKs). Its releases are tagged client/vX.Y.Z, with gen/go/vX.Y.Z.
module github.com/better-compute/better-compute/client

go 1.26.0

require (
	connectrpc.com/connect v1.21.1
	github.com/better-compute/better-compute/gen/go v0.0.0-00010101000000-000000000000
	github.com/coder/websocket v1.8.14
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260928230214-8a89bd6388cc
	google.golang.org/protobuf v1.36.12
)

// Until the first tagged release, the SDK is built from this repository's generated code.
replace github.com/better-compute/better-compute/gen/go => ../gen/go
