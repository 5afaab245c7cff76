// Package oidctest runs a real OpenID provider for tests of sign-in: the example server of
// github.com/zitadel/oidc (Version), a complete OP with discovery, JWKS, the authorization code
// flow with PKCE, userinfo and a login page, keeping its state in memory. Each Provider runs it
// (as deviceop, the example's main listening on 127.0.0.1 only) on a free loopback port with its
// users in the test's temporary directory, and is stopped when the test ends. Login plays the
// browser through its login page.
//
// What the example server offers, and so what tests can rely on: the issuer is
// http://localhost:PORT/; the confidential client "web" (secret "secret", client_secret_basic)
// and the clients "api" and "native" (public, PKCE) accept the Options' redirect URIs; the ID
// token carries sub (the user's ID) but no profile or email claims, which userinfo returns
// (name is "FirstName LastName"); there is no groups claim; every start signs with a new RSA key
// under a new key id. Its discovery document names a device authorization endpoint, but none of
// its clients may use the device flow (unauthorized_client); Options.Device adds one more
// client, "device" (secret "secret", client_secret_basic), the only one allowed the device flow;
// ApproveDevice plays the user's part. The example completes a device flow with the username
// entered, not the user's ID: the tokens' subject is the Username, and the provider
// then looks the user up by that subject as an ID, failing the token request (server_error,
// "user not found") unless the user's ID is their Username. So only such a user can approve.
//
// A test is skipped when the binary is missing (scripts/setup installs it), unless
// BETTER_COMPUTE_REQUIRE_OIDC=1 is set, as CI does, when it fails instead.
package oidctest

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/childproc"
	"github.com/better-compute/better-compute/internal/poll"
)

// startTimeout bounds how long the server may take to answer its discovery document.
const startTimeout = 30 * time.Second

// bindAttempts is how many ports the server is started on before a failed start fails the test:
// the port is chosen free, then bound by the server, and another process may take it in between.
const bindAttempts = 3

// listenFailed is what the example server logs when it cannot listen (it does not log why).
const listenFailed = `msg="server terminated"`

// discoveryPath is the discovery document's path below the issuer.
const discoveryPath = ".well-known/openid-configuration"

// User is an account that can sign in to the provider.
type User struct {
	// ID is the subject (sub) of the user's tokens.
	ID string
	// Username and Password are what the login page accepts; Username is also the
	// preferred_username claim.
	Username string
	Password string
	// FirstName and LastName make the name claim, "FirstName LastName", and the given_name and
	// family_name claims.
	FirstName string
	LastName  string
	// Email is the email claim, always verified.
	Email string
}

// DefaultUser is the only user of a provider started without users.
var DefaultUser = User{
	ID: "user-1", Username: "alice", Password: "alice-password",
	FirstName: "Alice", LastName: "Example", Email: "alice@example.com",
}

// Options configure a provider.
type Options struct {
	// RedirectURIs are the redirect URIs the clients accept. They are fixed for the provider's
	// life, so start the relying party first.
	RedirectURIs []string
	// Users are the accounts that can sign in; none means DefaultUser.
	Users []User
	// Device registers one more client, DeviceClientID, that may use the device flow (see
	// ApproveDevice; the approving user's ID must be their Username).
	Device bool
}

// Provider is a running example OpenID provider. Restart, SetUsers and Login fail the test they
// were given (Restart the one given to Start), so call them from that test's goroutine.
type Provider struct {
	t            testing.TB
	bin          string
	usersPath    string
	logPath      string
	redirectURIs []string
	device       bool // whether the device client is registered
	port         int

	mu   sync.Mutex
	proc *childproc.Process
}

// Start starts the provider until the test ends and returns once its discovery document
// answers. It skips the test when the binary is missing (unless RequireEnv is set) and fails it
// when the provider does not start.
func Start(t testing.TB, o Options) *Provider {
	t.Helper()
	bin := findBinary(t, deviceBinary)
	dir := t.TempDir()
	p := &Provider{
		t:            t,
		bin:          bin,
		usersPath:    filepath.Join(dir, "users.json"),
		logPath:      filepath.Join(dir, "server.log"),
		redirectURIs: o.RedirectURIs,
		device:       o.Device,
	}
	p.SetUsers(o.Users)
	t.Cleanup(p.stop)
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatalf("oidctest: %v", err)
		}
		p.port = port
		failed := p.launch()
		if failed == "" {
			return p
		}
		if attempt == bindAttempts || !strings.Contains(failed, listenFailed) {
			t.Fatalf("oidctest: the OpenID provider exited on port %d:\n%s", port, failed)
		}
	}
}

// Issuer is the provider's issuer, "http://localhost:PORT/", which is also its base URL.
func (p *Provider) Issuer() string { return "http://localhost:" + strconv.Itoa(p.port) + "/" }

// ClientID is the confidential client relying parties use, "web".
func (p *Provider) ClientID() string { return "web" }

// ClientSecret is ClientID's secret, sent with HTTP basic authentication.
func (p *Provider) ClientSecret() string { return "secret" }

// DeviceClientID is the confidential client allowed the device flow (and only it), "device";
// only a provider started with Options.Device has it.
func (p *Provider) DeviceClientID() string { return "device" }

// DeviceClientSecret is DeviceClientID's secret, sent with HTTP basic authentication.
func (p *Provider) DeviceClientSecret() string { return "secret" }

// Log returns everything the provider has logged since Start, across restarts: the requests it
// served and the errors it returned.
func (p *Provider) Log() string { return childproc.LogSince(p.logPath, 0) }

// SetUsers replaces the accounts that can sign in (none means DefaultUser). The provider reads
// them when it starts, so they take effect at the next Restart.
func (p *Provider) SetUsers(users []User) {
	p.t.Helper()
	if len(users) == 0 {
		users = []User{DefaultUser}
	}
	type fileUser struct {
		User
		EmailVerified bool
	}
	byID := make(map[string]fileUser, len(users))
	for _, u := range users {
		byID[u.ID] = fileUser{User: u, EmailVerified: true}
	}
	b, err := json.Marshal(byID)
	if err != nil {
		p.t.Fatalf("oidctest: encode users: %v", err)
	}
	tmp := p.usersPath + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		p.t.Fatalf("oidctest: write users: %v", err)
	}
	if err := os.Rename(tmp, p.usersPath); err != nil {
		p.t.Fatalf("oidctest: write users: %v", err)
	}
}

// Restart stops the provider and starts it again on the same port, so with the same issuer: it
// then signs with a new key (a rotation its relying parties must follow), knows the users of the
// last SetUsers, and has forgotten every code, token and login in progress.
func (p *Provider) Restart() {
	p.t.Helper()
	p.stop()
	if failed := p.launch(); failed != "" {
		p.t.Fatalf("oidctest: the OpenID provider exited when restarted on port %d:\n%s", p.port, failed)
	}
}

// launch starts the server on p.port and waits until it serves its discovery document or exits.
// It returns what the server logged when it exited, or "" once it serves.
func (p *Provider) launch() string {
	p.t.Helper()
	offset := childproc.FileSize(p.logPath)
	proc, err := childproc.Start(p.bin, nil, []string{
		"PORT=" + strconv.Itoa(p.port),
		"REDIRECT_URI=" + strings.Join(p.redirectURIs, ","),
		"USERS_FILE=" + p.usersPath,
		"DEVICE_CLIENT=" + map[bool]string{false: "0", true: "1"}[p.device],
	}, p.logPath)
	if err != nil {
		p.t.Fatalf("oidctest: %v", err)
	}
	p.mu.Lock()
	p.proc = proc
	p.mu.Unlock()
	poll.Until(p.t, startTimeout, "the OpenID provider on port "+strconv.Itoa(p.port)+" serves its discovery document or exits",
		func() bool { return proc.Done() || p.serving(offset) },
		poll.Report(p.Log))
	if proc.Done() {
		if failed := childproc.LogSince(p.logPath, offset); failed != "" {
			return failed
		}
		return "(exited without logging)"
	}
	return ""
}

// serving reports whether the discovery document answers with the issuer and this start of the
// server (its log after offset) served it, not another that holds the port.
func (p *Provider) serving(offset int64) bool {
	ctx, cancel := context.WithTimeout(p.t.Context(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Issuer()+discoveryPath, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var doc struct {
		Issuer string `json:"issuer"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&doc) != nil || doc.Issuer != p.Issuer() {
		return false
	}
	return strings.Contains(childproc.LogSince(p.logPath, offset), "path=/"+discoveryPath)
}

// stop stops the server and waits until it has exited. Stopping a stopped server does nothing.
func (p *Provider) stop() {
	p.mu.Lock()
	proc := p.proc
	p.mu.Unlock()
	if proc != nil {
		proc.Stop()
	}
}
