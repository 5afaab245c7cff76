// Package sdk_test runs the Go SDK (module github.com/better-compute/better-compute/client)
// against a real API on a fresh database: tests that need the server, which the SDK's own
// module, free of server dependencies, cannot hold.
package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/client"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	systemv1 "github.com/better-compute/better-compute/gen/go/bettercompute/system/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestAgainstServer(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	ctx := t.Context()
	c := client.New(env.URL+"/", client.WithAPIKey(env.AdminKey))

	t.Run("success", func(t *testing.T) {
		info, err := c.System.Info(ctx, &systemv1.InfoRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if info.GetVersion() == "" {
			t.Error("system/info: empty version")
		}
		me, err := c.IAM.WhoAmI(ctx, &iamv1.WhoAmIRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if me.GetPrincipal().GetName() != "admin" {
			t.Errorf("whoAmI: principal %q, want admin", me.GetPrincipal().GetName())
		}
	})

	t.Run("auth failure is a typed error", func(t *testing.T) {
		for name, opts := range map[string][]client.Option{
			"no key":    nil,
			"wrong key": {client.WithAPIKey("bck_nope_nope")},
		} {
			_, err := client.New(env.URL, opts...).IAM.WhoAmI(ctx, &iamv1.WhoAmIRequest{})
			var cerr *connect.Error
			if !errors.As(err, &cerr) || cerr.Code() != connect.CodeUnauthenticated {
				t.Errorf("%s: whoAmI error %v, want a *connect.Error with code unauthenticated", name, err)
			}
		}
	})

	t.Run("an invalid request names the field", func(t *testing.T) {
		t.Parallel()
		_, err := c.IAM.GetPrincipal(t.Context(), &iamv1.GetPrincipalRequest{Id: "nope"})
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("getPrincipal error %v, want invalid_argument", err)
		}
		want := []client.FieldViolation{{Field: "id", Description: `must be a UUID, got "nope"`}}
		if got := client.FieldViolations(err); !slices.Equal(got, want) {
			t.Errorf("FieldViolations = %+v, want %+v", got, want)
		}
		if got := client.FieldViolations(errors.New("not a call")); got != nil {
			t.Errorf("FieldViolations of a plain error = %+v, want nil", got)
		}
	})

	t.Run("pagination", func(t *testing.T) {
		want := map[string]bool{}
		for i := range 5 {
			name := fmt.Sprintf("paged-%d", i)
			if _, err := c.IAM.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{
				Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: name,
			}); err != nil {
				t.Fatal(err)
			}
			want[name] = true
		}
		pages := 0
		for p, err := range client.All(ctx, func(ctx context.Context, token string) ([]*iamv1.Principal, string, error) {
			pages++
			res, err := c.IAM.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{PageSize: 2, PageToken: token})
			return res.GetPrincipals(), res.GetNextPageToken(), err
		}) {
			if err != nil {
				t.Fatal(err)
			}
			delete(want, p.GetName())
		}
		if len(want) > 0 {
			t.Errorf("principals missing from the pages: %v", want)
		}
		if pages < 3 {
			t.Errorf("%d pages of 2 for 6 principals, want at least 3", pages)
		}
	})
}

func TestIdempotentRetryDoesNotActTwice(t *testing.T) {
	t.Parallel()
	// Against the real server: the same key twice returns the stored principal instead of
	// failing with already_exists.
	env := servertest.New(t)
	ctx := client.WithIdempotencyKey(t.Context(), "same-key")
	c := client.New(env.URL, client.WithAPIKey(env.AdminKey))
	req := &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: "once"}
	a, err := c.IAM.CreatePrincipal(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.IAM.CreatePrincipal(ctx, req)
	if err != nil {
		t.Fatalf("repeat with the same Idempotency-Key: %v", err)
	}
	if a.GetPrincipal().GetId() != b.GetPrincipal().GetId() {
		t.Errorf("repeat created principal %s, first %s", b.GetPrincipal().GetId(), a.GetPrincipal().GetId())
	}
}
