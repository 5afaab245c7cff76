package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
)

// deviceLogin runs the device authorization flow (RFC 8628): it prints the verification URI and
// the user code, then polls at the interval the API gives until the user approved, the flow
// expired or the command is interrupted. A provider that does not offer the flow is refused
// by auth/startDeviceLogin, and said so.
func deviceLogin(cmd *cobra.Command, o *Options, auth authv1connect.AuthServiceClient, tenant, method string) (*authv1.Login, error) {
	ctx := cmd.Context()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	start, err := auth.StartDeviceLogin(sctx, &authv1.StartDeviceLoginRequest{Tenant: tenant, Method: method})
	cancel()
	if err != nil {
		if cerr, ok := errors.AsType[*connect.Error](err); ok && connect.CodeOf(err) != connect.CodeNotFound {
			return nil, connect.NewError(cerr.Code(), fmt.Errorf("auth method %q cannot sign in with the device flow (sign in without --device): %s", method, cerr.Message()))
		}
		return nil, err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "To sign in through %s of tenant %s, open\n  %s\nand enter the code\n  %s\n", method, tenant, start.GetVerificationUri(), start.GetUserCode())
	open := start.GetVerificationUri()
	if c := start.GetVerificationUriComplete(); c != "" {
		fmt.Fprintf(out, "(or open %s, which carries the code)\n", c)
		open = c
	}
	fmt.Fprintln(out, "Waiting for the sign-in (Ctrl-C to stop)…")
	o.openBrowser(open)

	interval := time.Duration(max(start.GetIntervalSeconds(), 1)) * time.Second
	wctx, cancel := context.WithDeadline(ctx, start.GetExpireTime().AsTime())
	defer cancel()
	for {
		select {
		case <-time.After(interval):
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, fmt.Errorf("sign-in stopped: %w", context.Cause(ctx))
			}
			return nil, &ExitError{Code: ExitAuth, Err: errors.New("the device sign-in expired before it was approved: run login --sso --device again")}
		}
		pctx, cancel := context.WithTimeout(wctx, 30*time.Second)
		res, err := auth.PollDeviceLogin(pctx, &authv1.PollDeviceLoginRequest{Handle: start.GetHandle()})
		cancel()
		if err != nil {
			return nil, err
		}
		if !res.GetPending() {
			return res.GetLogin(), nil
		}
	}
}
