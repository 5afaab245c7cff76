package tunnelhop_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	gatewayv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// TestOpenHeader: a tunnel's opening travels as protobuf in unpadded standard base64 and comes
// back whole; padded base64 is read too; what is not an OpenTunnelRequest is refused with a
// reason, before any field is looked at.
func TestOpenHeader(t *testing.T) {
	t.Parallel()
	want := &gatewayv1.OpenTunnelRequest{TunnelId: "0193c1a2-7b1e-7000-8000-000000000001", NodeId: "0193c1a2-7b1e-7000-8000-000000000002", Port: 65535}
	v, err := tunnelhop.EncodeOpen(want)
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(v, "=\r\n") {
		t.Errorf("header value %q: want unpadded base64 on one line", v)
	}
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{v, base64.StdEncoding.EncodeToString(b)} {
		got, err := tunnelhop.DecodeOpen(value)
		if err != nil || !proto.Equal(got, want) {
			t.Errorf("DecodeOpen(%q) = %v, %v; want %v", value, got, err, want)
		}
	}
	for _, tc := range []struct{ name, value, want string }{
		{"empty", "", "missing"},
		{"not base64", "a b", "not base64"},
		{"URL-safe base64", base64.RawURLEncoding.EncodeToString([]byte{0xfb, 0xff}), "not base64"},
		{"not protobuf", base64.RawStdEncoding.EncodeToString([]byte{0xff, 0xff}), "not an OpenTunnelRequest"},
		{"too long", strings.Repeat("A", 2<<10), "longer than"},
	} {
		if got, err := tunnelhop.DecodeOpen(tc.value); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: DecodeOpen = %v, %v; want an error saying %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := tunnelhop.EncodeOpen(&gatewayv1.OpenTunnelRequest{TunnelId: "\xff"}); err == nil {
		t.Error("EncodeOpen of a tunnel id that is not UTF-8: no error")
	}
}

// TestDialRefusesBadPorts: the dialler sends no stream for a port no gateway would take.
func TestDialRefusesBadPorts(t *testing.T) {
	t.Parallel()
	d := tunnelhop.NewDialerTLS(nil)
	for _, port := range []int{0, -1, 65536} {
		if _, err := d.Dial(t.Context(), "https://gateway.invalid", "t", "n", port); err == nil || !strings.Contains(err.Error(), "want 1 to 65535") {
			t.Errorf("port %d: %v, want a refusal before any request", port, err)
		}
	}
}
