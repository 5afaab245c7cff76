package authmethods

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/requestid"
	"github.com/better-compute/better-compute/internal/scrub"
)

// The dashboard's sign-in routes, below the API's base path.
const (
	// LoginPath starts a sign-in: POST {basePath}/auth/login from the dashboard's own page, with
	// the X-Better-Compute header and the form fields tenant, method and return; it answers
	// {"authorizationUrl": …} for the page to go to. A GET (a link, a top-level navigation
	// another site makes) starts nothing.
	LoginPath = "/auth/login"
	// CallbackPath is where the provider sends the browser back; the method must list
	// {baseURL}{basePath}/auth/callback among its redirect URIs.
	CallbackPath = "/auth/callback"
)

// loginCookie binds a browser's sign-in to the browser that started it: it holds the flow's
// state, which the callback must carry too, so a state planted from another browser (login
// CSRF) is refused.
const loginCookie = "bc_login"

// defaultReturn is where the dashboard's sign-in lands unless it asks for another page.
const defaultReturn = "/dashboard/"

// maxLoginForm bounds the sign-in start's form: a tenant, a method and a return path.
const maxLoginForm = 8 << 10

// sameOrigin refuses a cross-origin browser request (by Sec-Fetch-Site, else Origin against
// Host): the sign-in start takes none, even from an origin the API's CORS settings allow, since
// the session cookie it leads to serves only the API's own origin.
var sameOrigin = http.NewCrossOriginProtection()

// loginStart is the sign-in start's answer: where the page sends the browser next.
type loginStart struct {
	AuthorizationURL string `json:"authorizationUrl"`
}

// Login starts the dashboard's sign-in, when the dashboard's own page asks (POST with the
// X-Better-Compute header, which another site's page cannot send, from the same origin) and the
// browser is not signed in already: it records a code flow with PKCE, state and nonce, sets the
// login cookie, and answers the provider's authorization URL. The guard's per-address bucket
// runs before it (guard.LimitAddress), and the flow caps in startFlow.
func (s *Service) Login(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if r.Header.Get(guard.ClientHeader) != "1" {
		s.refuse(w, r, apierr.PermissionDenied("a sign-in is started from the dashboard (POST with the %s header): open the dashboard and choose the identity provider there", guard.ClientHeader))
		return
	}
	if err := sameOrigin.Check(r); err != nil {
		s.refuse(w, r, apierr.PermissionDenied("a sign-in is started from this deployment's own dashboard, not from another site"))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if err := r.ParseForm(); err != nil {
		s.refuse(w, r, apierr.InvalidArgument("form", "must be a form of tenant, method and return of at most %d bytes", maxLoginForm))
		return
	}
	if err := s.notSignedIn(ctx, r); err != nil {
		s.refuse(w, r, err)
		return
	}
	m, err := s.loginMethod(ctx, r.PostForm.Get("tenant"), r.PostForm.Get("method"), "oidc")
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	callback, secure := s.callback(r)
	if !redirectAllowed(m.row.RedirectUris, callback) {
		s.refuse(w, r, apierr.FailedPrecondition("auth method %q does not list %s among its redirect URIs, where this deployment's sign-in returns", m.row.Name, callback))
		return
	}
	authURL, state, _, err := s.beginCodeFlow(ctx, m, flowBrowser, callback, returnPath(r.PostForm.Get("return")))
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: loginCookie, Value: state, Path: s.basePath + "/auth/", MaxAge: int(flowTTL / time.Second),
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(loginStart{AuthorizationURL: authURL})
}

// LoginGet answers a GET of the sign-in start (a link, or a top-level navigation another site
// made): 405, starting nothing, so no page can sign a browser in to an account of its choosing.
func (s *Service) LoginGet(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusMethodNotAllowed)
	_, _ = w.Write([]byte("Sign-in is started from the dashboard: open /dashboard/ and choose the identity provider there.\n"))
}

// notSignedIn refuses a browser sign-in while the browser holds the cookie of a session that is
// still live: a sign-in never silently replaces the session a browser has (which a page that
// got a browser through another tenant's sign-in would otherwise do). The user signs out first.
// A cookie of an ended session is no obstacle.
func (s *Service) notSignedIn(ctx context.Context, r *http.Request) error {
	c, err := r.Cookie(auth.SessionCookie)
	if err != nil || c.Value == "" || s.bridge == nil {
		return nil
	}
	h := http.Header{"Cookie": {(&http.Cookie{Name: auth.SessionCookie, Value: c.Value}).String()}, guard.ClientHeader: {"1"}}
	if p, err := s.bridge.Authenticate(ctx, h); err == nil && p != nil {
		return apierr.FailedPrecondition("this browser is already signed in (as %s): sign out in the dashboard first, then sign in again", p.Name)
	}
	return nil
}

// callback is where the provider returns the browser, and whether cookies are Secure: from the
// deployment's base URL, or, when none is configured (dev on a port chosen at start), from the
// request itself. A forged Host can only pick among the method's registered redirect URIs.
func (s *Service) callback(r *http.Request) (url string, secure bool) {
	if s.callbackURL != "" {
		return s.callbackURL, s.secureCookies
	}
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return scheme + r.Host + s.basePath + CallbackPath, r.TLS != nil
}

// Callback finishes the dashboard's sign-in: the browser must not hold a live session already
// (notSignedIn), the state must be the login cookie's and a flow's not yet spent; then the code is redeemed and verified, the principal signed in, and the session
// set as an HttpOnly cookie before the browser returns to the dashboard.
func (s *Service) Callback(w http.ResponseWriter, r *http.Request) {
	ctx := quota.WithLimits(r.Context(), s.limits)
	q := r.URL.Query()
	_, secure := s.callback(r)
	clear := &http.Cookie{Name: loginCookie, Path: s.basePath + "/auth/", MaxAge: -1, HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
	http.SetCookie(w, clear)
	if e := q.Get("error"); e != "" {
		s.refuse(w, r, apierr.PermissionDenied("the identity provider ended the sign-in: %s", scrub.Truncate(scrub.String(e), 64)))
		return
	}
	if err := s.notSignedIn(ctx, r); err != nil {
		s.refuse(w, r, err)
		return
	}
	state := q.Get("state")
	c, err := r.Cookie(loginCookie)
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		s.refuse(w, r, apierr.PermissionDenied("this sign-in was not started by this browser (its state does not match): start again"))
		return
	}
	f, verifier, err := s.spendFlow(ctx, flowBrowser, state)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	code := q.Get("code")
	if code == "" || len(code) > 2048 {
		s.refuse(w, r, apierr.InvalidArgument("code", "the provider's redirect carried no code"))
		return
	}
	login, err := s.completeCodeFlow(ctx, f, verifier, code, auth.SessionBrowser)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: auth.SessionCookie, Value: login.GetSessionToken(), Path: "/",
		Expires: login.GetExpireTime().AsTime(), HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode,
	})
	http.Redirect(w, r, returnPath(f.ReturnTo), http.StatusSeeOther)
}

// returnPath is where a sign-in may land: a path of this deployment (never another host, so
// the sign-in cannot be made an open redirect), the dashboard by default.
func returnPath(p string) string {
	// Browsers drop tabs and newlines from a Location and read a backslash as a slash, so
	// "/\t/evil.example" would leave the deployment: any control character, space or backslash
	// is refused with the leading "//".
	if p == "" || len(p) > 512 || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") ||
		strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }) {
		return defaultReturn
	}
	return p
}

// refuse answers a failed browser sign-in with a short plain-text page: the status of the
// error's Connect code and its message, or for an unexpected error a generic one with the
// request id (logged in full).
func (s *Service) refuse(w http.ResponseWriter, r *http.Request, err error) {
	cerr, internal := apierr.ToConnect(err, requestid.From(r.Context()))
	if internal {
		s.log.ErrorContext(r.Context(), "browser sign-in failed", "err", err)
	}
	status := httpStatus(cerr.Code())
	if v := cerr.Meta().Get(guard.RetryAfterHeader); v != "" {
		w.Header().Set(guard.RetryAfterHeader, v)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte("Sign-in failed: " + cerr.Message() + "\n"))
}

// httpStatus is the HTTP status of a Connect code, as the Connect protocol maps them.
func httpStatus(c connect.Code) int {
	switch c {
	case connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeOutOfRange:
		return http.StatusBadRequest
	case connect.CodeUnauthenticated:
		return http.StatusUnauthorized
	case connect.CodePermissionDenied:
		return http.StatusForbidden
	case connect.CodeNotFound:
		return http.StatusNotFound
	case connect.CodeResourceExhausted:
		return http.StatusTooManyRequests
	case connect.CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
