package cli

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/client"
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
)

// callbackPath is the loopback redirect URI's path: http://127.0.0.1:PORT/callback.
const callbackPath = "/callback"

// ssoFlags are login's flags for a sign-in through an identity provider.
type ssoFlags struct {
	enabled      bool
	tenant       string
	method       string
	callbackPort int
	device       bool
}

func (f *ssoFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.BoolVar(&f.enabled, "sso", false, "sign in through an auth method of --tenant (its identity provider) instead of with --api-key")
	fs.StringVar(&f.tenant, "tenant", "", "with --sso: the tenant (name or id) whose auth method to sign in with")
	fs.StringVar(&f.method, "method", "", "with --sso: the auth method (default the tenant's only one; auth login-methods lists them)")
	fs.IntVar(&f.callbackPort, "callback-port", 0, "with --sso: the loopback port the provider redirects to (default any free port)")
	fs.BoolVar(&f.device, "device", false, "with --sso: use the device flow (enter a code on any device) instead of a browser redirect")
}

// authClient calls the auth service at api, with token as the bearer when not empty.
func authClient(o *Options, api, token string) authv1connect.AuthServiceClient {
	return authv1connect.NewAuthServiceClient(o.HTTPClient, api, connect.WithInterceptors(bearer(token)))
}

// bearer sends the client header, and token as the bearer when not empty, on every call.
func bearer(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set(client.ClientHeader, "1")
			if token != "" {
				req.Header().Set("Authorization", "Bearer "+token)
			}
			return next(ctx, req)
		}
	}
}

// ssoLogin signs in through an auth method, by the loopback flow or the device flow, and saves
// the session as the context name.
func ssoLogin(cmd *cobra.Command, o *Options, f *ssoFlags, name string) error {
	r := o.Resolver
	switch {
	case r.api == "" || f.tenant == "":
		return usageError(errors.New("login --sso needs --api and --tenant"))
	case r.apiKey != "":
		return usageError(errors.New("login --sso signs in through the identity provider: drop --api-key"))
	case f.callbackPort < 0 || f.callbackPort > 65535:
		return usageError(fmt.Errorf("--callback-port must be a port number, got %d", f.callbackPort))
	case f.device && f.callbackPort != 0:
		return usageError(errors.New("--callback-port is for the browser flow, not --device"))
	}
	auth := authClient(o, r.api, "")
	method, err := pickMethod(cmd.Context(), auth, f)
	if err != nil {
		return err
	}
	var login *authv1.Login
	if f.device {
		login, err = deviceLogin(cmd, o, auth, f.tenant, method)
	} else {
		login, err = loopbackLogin(cmd, o, auth, f, method)
	}
	if err != nil {
		return err
	}
	exp := login.GetExpireTime().AsTime()
	if err := saveContext(r, Context{Name: name, API: r.api, SessionToken: login.GetSessionToken(), SessionExpires: &exp}); err != nil {
		return err
	}
	who, tenant, roles := login.GetPrincipal().GetName(), login.GetTenant().GetName(), login.GetRoles()
	// The session's own view, as every later command will see it.
	wctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
	defer cancel()
	if me, err := client.New(r.api, client.WithAPIKey(login.GetSessionToken()), client.WithHTTPClient(o.HTTPClient)).IAM.WhoAmI(wctx, &iamv1.WhoAmIRequest{}); err == nil {
		who, tenant, roles = me.GetPrincipal().GetName(), me.GetTenant().GetName(), me.GetRoles()
	}
	names := make([]string, 0, len(roles))
	for _, x := range roles {
		names = append(names, strings.ToLower(strings.TrimPrefix(x.String(), "ROLE_")))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Signed in to %s as %s of tenant %s (%s) until %s; context %q is current.\n",
		r.api, who, tenant, strings.Join(names, ", "), exp.Local().Format(time.RFC3339), name)
	return nil
}

// pickMethod is --method, else the tenant's only login method; several, or none, is an error
// that lists them.
func pickMethod(ctx context.Context, auth authv1connect.AuthServiceClient, f *ssoFlags) (string, error) {
	if f.method != "" {
		return f.method, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := auth.ListLoginMethods(ctx, &authv1.ListLoginMethodsRequest{Tenant: f.tenant})
	if err != nil {
		return "", err
	}
	ms := res.GetMethods()
	switch len(ms) {
	case 0:
		return "", &ExitError{Code: ExitNotFound, Err: fmt.Errorf("tenant %q has no sign-in method (auth methods are made with auth-methods create)", f.tenant)}
	case 1:
		return ms[0].GetName(), nil
	}
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, fmt.Sprintf("%s (%s)", m.GetName(), m.GetDisplayName()))
	}
	return "", usageError(fmt.Errorf("tenant %q has %d sign-in methods, choose one with --method: %s", f.tenant, len(ms), strings.Join(names, ", ")))
}

// callback is what the provider's redirect to the loopback address carried.
type callback struct {
	code string
	err  error
	// done receives the sign-in's outcome, for the page the browser shows.
	done chan error
}

// loopbackLogin runs the authorization code flow with a loopback redirect (RFC 8252): it
// listens on 127.0.0.1, starts the flow with that redirect URI, has the user open the
// provider's URL, and completes the flow with the code of the first request to the callback
// path; a request with another state ends the sign-in, refused. It waits until the flow
// expires or the command is interrupted.
func loopbackLogin(cmd *cobra.Command, o *Options, auth authv1connect.AuthServiceClient, f *ssoFlags, method string) (*authv1.Login, error) {
	ctx := cmd.Context()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:"+strconv.Itoa(f.callbackPort))
	if err != nil {
		return nil, fmt.Errorf("listen for the identity provider's redirect: %w", err)
	}
	defer ln.Close()
	redirect := fmt.Sprintf("http://127.0.0.1:%d%s", ln.Addr().(*net.TCPAddr).Port, callbackPath)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	start, err := auth.StartLogin(sctx, &authv1.StartLoginRequest{Tenant: f.tenant, Method: method, RedirectUri: redirect})
	cancel()
	if err != nil {
		return nil, err
	}
	got := make(chan callback, 1)
	stop := make(chan struct{})
	srv := &http.Server{Handler: callbackHandler(start.GetState(), got, stop), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		close(stop)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()

	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Sign in through %s of tenant %s: open this URL in a browser on this machine\n  %s\nWaiting for the sign-in (Ctrl-C to stop)…\n",
		method, f.tenant, start.GetAuthorizationUrl())
	o.openBrowser(start.GetAuthorizationUrl())

	wctx, cancel := context.WithDeadline(ctx, start.GetExpireTime().AsTime())
	defer cancel()
	var cb callback
	select {
	case cb = <-got:
	case <-wctx.Done():
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sign-in stopped: %w", context.Cause(ctx))
		}
		return nil, &ExitError{Code: ExitAuth, Err: errors.New("the sign-in expired before the identity provider redirected back: run login --sso again")}
	}
	if cb.err != nil {
		cb.done <- cb.err
		return nil, cb.err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := auth.CompleteLogin(cctx, &authv1.CompleteLoginRequest{State: start.GetState(), Code: cb.code})
	cb.done <- err
	if err != nil {
		return nil, err
	}
	return res.GetLogin(), nil
}

// callbackHandler answers the provider's redirect: the first request to the callback path ends
// the wait (with its code when its state is state, else refused), and the browser is shown the
// sign-in's outcome; later requests are told the sign-in is over. Once stop is closed (the
// command is done waiting) no request waits for an outcome.
func callbackHandler(state string, got chan<- callback, stop <-chan struct{}) http.Handler {
	taken := make(chan struct{}, 1)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != callbackPath {
			http.NotFound(w, r)
			return
		}
		select {
		case taken <- struct{}{}:
		default:
			page(w, http.StatusGone, "This sign-in is over", "Run better-compute login --sso again if it failed.")
			return
		}
		q := r.URL.Query()
		cb := callback{code: q.Get("code"), done: make(chan error, 1)}
		status := http.StatusOK
		switch {
		case q.Get("state") != state:
			cb.err = &ExitError{Code: ExitAuth, Err: errors.New("the identity provider's redirect carried another sign-in's state: refused (start again)")}
			status = http.StatusBadRequest
		case q.Get("error") != "":
			cb.err = &ExitError{Code: ExitAuth, Err: fmt.Errorf("the identity provider refused the sign-in: %s %s", q.Get("error"), q.Get("error_description"))}
			status = http.StatusForbidden
		case cb.code == "":
			cb.err = &ExitError{Code: ExitAuth, Err: errors.New("the identity provider's redirect carried no code: refused")}
			status = http.StatusBadRequest
		}
		got <- cb
		var err error
		select {
		case err = <-cb.done:
		case <-stop:
			// The outcome is sent before stop closes: prefer it.
			select {
			case err = <-cb.done:
			default:
				page(w, http.StatusGone, "This sign-in is over", "Run better-compute login --sso again.")
				return
			}
		case <-r.Context().Done():
			return
		}
		if err != nil {
			if status == http.StatusOK {
				status = http.StatusForbidden
			}
			page(w, status, "Sign-in failed", oneLine(err.Error()))
			return
		}
		page(w, http.StatusOK, "Signed in", "You can close this tab and return to the terminal.")
	})
}

// page answers the browser a small HTML page.
func page(w http.ResponseWriter, status int, title, text string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html><meta charset=utf-8><title>%[1]s</title><h1>%[1]s</h1><p>%[2]s</p>\n",
		html.EscapeString("better-compute: "+title), html.EscapeString(text))
}

// signOut ends the session of c at its API.
func signOut(ctx context.Context, o *Options, c Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := authClient(o, c.API, c.SessionToken).SignOut(ctx, &authv1.SignOutRequest{})
	return err
}
