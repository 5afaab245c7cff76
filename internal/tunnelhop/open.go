package tunnelhop

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	gatewayv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1"
)

// HeaderOpen is the control hop's one request header of its own: the tunnel to open, a
// bettercompute.gateway.v1.OpenTunnelRequest (proto/bettercompute/gateway/v1/control.proto) as
// binary protobuf in unpadded standard base64, as gRPC carries binary metadata. It travels in
// the headers rather than the body so that the gateway can refuse a tunnel before it reads any
// of the stream, and the body stays nothing but frames.
const HeaderOpen = "Bc-Open-Tunnel-Bin"

// maxOpenBytes bounds the OpenTunnelRequest a gateway decodes: two UUIDs and a port take some
// eighty bytes, so anything near this is not a tunnel's opening. The control server's header
// limit bounds the header itself before this is reached.
const maxOpenBytes = 1 << 10

// EncodeOpen is the value of HeaderOpen for req. It fails only for a request protobuf cannot
// encode (a string that is not UTF-8).
func EncodeOpen(req *gatewayv1.OpenTunnelRequest) (string, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("tunnel: encode the tunnel's opening: %w", err)
	}
	return base64.RawStdEncoding.EncodeToString(b), nil
}

// DecodeOpen reads a HeaderOpen value (padded base64 is accepted too). It checks only the
// encoding: the gateway checks the fields (serveTunnel's contract). Its errors read as the rest
// of a sentence that starts with the header's name.
func DecodeOpen(value string) (*gatewayv1.OpenTunnelRequest, error) {
	if value == "" {
		return nil, errors.New("missing: want the tunnel's OpenTunnelRequest")
	}
	if base64.RawStdEncoding.DecodedLen(len(value)) > maxOpenBytes {
		return nil, fmt.Errorf("longer than an OpenTunnelRequest of %d bytes", maxOpenBytes)
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(value, "="))
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	var req gatewayv1.OpenTunnelRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		return nil, fmt.Errorf("not an OpenTunnelRequest: %w", err)
	}
	return &req, nil
}
