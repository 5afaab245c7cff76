package cli_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1/authv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/cli"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/oidctest"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

var bob = oidctest.User{ID: "id-bob", Username: "bob", Password: "bob-pw", FirstName: "Bob", LastName: "Builder", Email: "bob@corp.example"}

// ssoEnv is the API and a real provider (internal/oidctest) with an OIDC auth method "corp" of
// the root tenant that makes Bob a viewer. The provider accepts only redirect URIs fixed at its
// start: the loopback one on port.
type ssoEnv struct {
	api  *servertest.Env
	op   *oidctest.Provider
	port int
}

func newSSOEnv(t *testing.T) *ssoEnv {
	t.Helper()
	api := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) { o.Auth.AllowPrivateIssuers = true })
	e := &ssoEnv{api: api, port: freePort(t)}
	redirect := "http://127.0.0.1:" + strconv.Itoa(e.port) + "/callback"
	e.op = oidctest.Start(t, oidctest.Options{RedirectURIs: []string{redirect}, Users: []oidctest.User{bob}})
	e.method(t, "corp")
	return e
}

// method adds an OIDC method of the root tenant through the provider.
func (e *ssoEnv) method(t *testing.T, name string) {
	t.Helper()
	admin := authv1connect.NewAuthServiceClient(e.api.HTTPClient(e.api.AdminKey), e.api.URL)
	_, err := admin.CreateAuthMethod(t.Context(), &authv1.CreateAuthMethodRequest{AuthMethod: &authv1.AuthMethod{
		Name: name, DisplayName: "Corp SSO", Kind: authv1.AuthMethodKind_AUTH_METHOD_KIND_OIDC,
		Issuer: e.op.Issuer(), ClientId: e.op.ClientID(), ClientSecret: e.op.ClientSecret(),
		RedirectUris: []string{"http://127.0.0.1:" + strconv.Itoa(e.port) + "/callback"},
		Rules:        []*authv1.BindingRule{{Priority: 1, Selectors: []*authv1.ClaimSelector{{Claim: "email", Values: []string{bob.Email}}}, Roles: []iamv1.Role{iamv1.Role_ROLE_VIEWER}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// login runs `better-compute login --sso args...` in the background; the returned channels
// give the URL it would open in a browser and then its result.
func (h *harness) login(args ...string) (<-chan string, <-chan result) {
	urls := make(chan string, 1)
	done := make(chan result, 1)
	h.open = func(u string) error { urls <- u; return nil }
	root := h.root()
	go func() {
		var out, errOut strings.Builder
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"login", "--sso"}, args...))
		err := root.ExecuteContext(h.t.Context())
		if err != nil {
			cli.PrintError(&errOut, err)
		}
		done <- result{stdout: out.String(), stderr: errOut.String(), code: cli.ExitCode(err)}
	}()
	return urls, done
}

func waitURL(t *testing.T, urls <-chan string, done <-chan result) string {
	t.Helper()
	select {
	case u := <-urls:
		return u
	case r := <-done:
		t.Fatalf("login --sso ended before opening a browser: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	case <-time.After(30 * time.Second):
		t.Fatal("login --sso opened no browser within 30 s")
	}
	return ""
}

func waitResult(t *testing.T, done <-chan result) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("login --sso did not end within 30 s")
	}
	return result{}
}

// get requests u as the browser would after the provider's redirect.
func get(t *testing.T, u string) (int, string) {
	t.Helper()
	res, err := http.Get(u) //nolint:noctx // a test's loopback request
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// TestLoginSSO: login --sso (the tenant's only method) prints the provider's URL; Bob signs in
// there; the provider's redirect reaches the command's loopback server, which shows the browser
// it is signed in; the context holds a session token that iam who-am-i uses, in a 0600 file;
// logout ends the session at the API.
func TestLoginSSO(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t)
	h := newHarness(t)
	urls, done := h.login("--api", e.api.URL, "--tenant", "root", "--callback-port", strconv.Itoa(e.port), "--context", "corp")
	authURL := waitURL(t, urls, done)
	to := e.op.Login(t, authURL, bob.Username, bob.Password)
	if to.Host != "127.0.0.1:"+strconv.Itoa(e.port) || to.Path != "/callback" {
		t.Fatalf("the provider redirected to %s", to)
	}
	if status, body := get(t, to.String()); status != http.StatusOK || !strings.Contains(body, "close this tab") {
		t.Errorf("the browser's page: %d %s", status, body)
	}
	r := waitResult(t, done)
	if r.code != 0 || !strings.Contains(r.stdout, authURL) || !strings.Contains(r.stdout, "corp:id-bob of tenant root (viewer)") ||
		!strings.Contains(r.stdout, `context "corp" is current`) {
		t.Fatalf("login --sso: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The loopback server is gone with the command: the redirect again reaches nothing.
	if res, err := http.Get(to.String()); err == nil { //nolint:noctx // a test's loopback request
		res.Body.Close()
		t.Errorf("the redirect again, after the sign-in: %s", res.Status)
	}

	if fi, err := os.Stat(filepath.Join(h.dir, "contexts.yaml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("contexts.yaml: %v, %v", fi, err)
	}
	cs, err := cli.LoadContexts(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := cs.Find("corp")
	if !ok || !strings.HasPrefix(c.SessionToken, "bcs_") || c.APIKey != "" || c.SessionExpires == nil || !c.SessionExpires.After(time.Now()) {
		t.Fatalf("the saved context: %+v", c)
	}
	if r := h.run("iam", "who-am-i", "-o", "json"); r.code != 0 || !strings.Contains(r.stdout, "corp:id-bob") {
		t.Fatalf("who-am-i with the context: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	if r := h.run("logout"); r.code != 0 || r.stderr != "" {
		t.Fatalf("logout: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := e.api.IAM(c.SessionToken).WhoAmI(t.Context(), &iamv1.WhoAmIRequest{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("the session after logout: %v, want unauthenticated", err)
	}
}

// TestLoginSSORefusals: a redirect with another state is refused at the loopback (and no
// sign-in completes); --device fails clearly, since the test provider offers no usable device
// flow (its clients lack the grant: only the refusal can be tested); without --method a tenant
// with several methods is a usage error that lists them.
func TestLoginSSORefusals(t *testing.T) {
	t.Parallel()
	e := newSSOEnv(t)

	t.Run("wrong state", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		urls, done := h.login("--api", e.api.URL, "--tenant", "root", "--method", "corp")
		u, err := url.Parse(waitURL(t, urls, done))
		if err != nil {
			t.Fatal(err)
		}
		redirect := u.Query().Get("redirect_uri")
		if !strings.HasPrefix(redirect, "http://127.0.0.1:") || !strings.HasSuffix(redirect, "/callback") {
			t.Fatalf("redirect_uri %q", redirect)
		}
		status, body := get(t, redirect+"?code=stolen&state="+url.QueryEscape(u.Query().Get("state")+"x"))
		if status != http.StatusBadRequest || !strings.Contains(body, "Sign-in failed") {
			t.Errorf("another state at the loopback: %d %s", status, body)
		}
		r := waitResult(t, done)
		if r.code != cli.ExitAuth || !strings.Contains(r.stderr, "state") {
			t.Errorf("login --sso after a wrong state: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if cs, err := cli.LoadContexts(h.dir); err != nil || len(cs.Contexts) != 0 {
			t.Errorf("contexts after a refused sign-in: %+v, %v", cs, err)
		}
	})

	t.Run("device flow not offered", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		r := h.run("login", "--sso", "--device", "--api", e.api.URL, "--tenant", "root", "--method", "corp")
		if r.code == 0 || r.code == cli.ExitUsage || !strings.Contains(r.stderr, "cannot sign in with the device flow") {
			t.Errorf("--device: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		t.Logf("--device: exit %d: %s", r.code, r.stderr)
	})

	t.Run("several methods", func(t *testing.T) {
		t.Parallel()
		e.method(t, "corp-two")
		h := newHarness(t)
		r := h.run("login", "--sso", "--api", e.api.URL, "--tenant", "root")
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--method") || !strings.Contains(r.stderr, "corp-two") {
			t.Errorf("two methods without --method: exit %d\n%s", r.code, r.stderr)
		}
	})
}

// TestEndedSession: a context whose session has ended is refused before any call, saying to
// sign in again, and context list says so; an API key from the environment still overrides it.
func TestEndedSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ended := time.Now().Add(-time.Minute)
	if err := cli.SaveContexts(h.dir, &cli.Contexts{Current: "corp", Contexts: []cli.Context{
		{Name: "corp", API: "http://127.0.0.1:1/api", SessionToken: "bcs_x_y", SessionExpires: &ended},
	}}); err != nil {
		t.Fatal(err)
	}
	if r := h.run("iam", "who-am-i"); r.code != cli.ExitAuth || !strings.Contains(r.stderr, "login --sso") {
		t.Errorf("an ended session: exit %d %s", r.code, r.stderr)
	}
	if r := h.run("context", "list"); !strings.Contains(r.stdout, "session ended") {
		t.Errorf("context list:\n%s", r.stdout)
	}
	h.env[cli.EnvAPIKey] = "bck_nope_nope"
	if r := h.run("iam", "who-am-i"); r.code != cli.ExitRetry && r.code != cli.ExitOther {
		t.Errorf("an API key over the ended session: exit %d %s (want the call tried)", r.code, r.stderr)
	}
}
