// Package metal is the redfish provider: bare-metal systems behind BMCs that speak Redfish,
// driven through gofish. A machine is a system the class may use that the provider claims on the
// BMC (see claim), boots once from the class's virtual media image (whose URL carries the
// machine's single-use boot configuration URL) or from PXE, and powers on; deleting it powers
// the system off, ejects the media, clears the boot override and releases the claim. Nothing is
// created or destroyed: systems are claimed and released.
package metal

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"

	"github.com/better-compute/better-compute/internal/provision"
)

// Kind is the provider's kind in classes and configuration.
const Kind = "redfish"

// Factory makes a redfish class's provider from its parameters (Params) and credentials
// (Credentials); it validates them, the endpoints against egress, without reaching a BMC.
func Factory(params json.RawMessage, credentials []byte, egress provision.Egress) (provision.Provider, error) {
	p, err := parseParams(params, egress)
	if err != nil {
		return nil, err
	}
	c, err := parseCredentials(credentials)
	if err != nil {
		return nil, err
	}
	return &provider{params: p, creds: c, egress: egress}, nil
}

// maxAnswerBytes bounds each answer read from a BMC: Redfish resources are a few kilobytes.
const maxAnswerBytes = 1 << 20

// claimMu serializes the claiming of free systems within the process, so two machines created
// at once do not take the same system; across processes, the claim is read back after writing
// it (see Create).
var claimMu sync.Mutex

type provider struct {
	params Params
	creds  Credentials
	egress provision.Egress
}

var _ provision.Provider = (*provider)(nil)

// system is one system of an endpoint, with the client that read it.
type system struct {
	endpoint string
	c        *gofish.APIClient
	sys      *schemas.ComputerSystem
}

func (s system) id(machine string) string { return s.endpoint + s.sys.ODataID + "#" + machine }

// connect opens a client of an endpoint; close it with disconnect. Its requests go through the
// deployment's egress policy (no private addresses unless allowed, checked when dialling; no
// redirects; answers of at most maxAnswerBytes), and a failed answer's body never reaches an
// error (see statusOnly).
func (p *provider) connect(ctx context.Context, endpoint string) (*gofish.APIClient, error) {
	hc := p.egress.Client(provision.ClientOptions{
		Timeout: time.Duration(p.params.Timeout), MaxAnswerBytes: maxAnswerBytes,
		// #nosec G402 -- only when the class says so (insecureSkipVerify).
		TLS: &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: p.params.InsecureSkipVerify},
	})
	hc.Transport = statusOnly{base: hc.Transport}
	c, err := gofish.ConnectContext(ctx, gofish.ClientConfig{
		Endpoint: endpoint, Username: p.creds.Username, Password: p.creds.Password, BasicAuth: true,
		HTTPClient: hc, NoModifyTransport: true,
	})
	if err != nil {
		hc.CloseIdleConnections()
		return nil, fmt.Errorf("redfish %s: connect: %w", endpoint, err)
	}
	return c, nil
}

func disconnect(c *gofish.APIClient) { c.HTTPClient.CloseIdleConnections() }

// allowed says whether the class may use the system with id.
func (p *provider) allowed(id string) bool {
	return len(p.params.Systems) == 0 || slices.Contains(p.params.Systems, id)
}

// systems lists the systems the class may use on every endpoint; done closes the clients.
func (p *provider) systems(ctx context.Context) (out []system, done func(), err error) {
	var clients []*gofish.APIClient
	done = func() {
		for _, c := range clients {
			disconnect(c)
		}
	}
	for _, e := range p.params.Endpoints {
		c, err := p.connect(ctx, e)
		if err != nil {
			done()
			return nil, func() {}, err
		}
		clients = append(clients, c)
		all, err := c.Service.Systems()
		if err != nil {
			done()
			return nil, func() {}, fmt.Errorf("redfish %s: list systems: %w", e, err)
		}
		for _, s := range all {
			if p.allowed(s.ID) {
				out = append(out, system{endpoint: e, c: c, sys: s})
			}
		}
	}
	return out, done, nil
}

// parseID splits a provider id, <endpoint><system path>#<machine id>, checking the endpoint is
// one of the class's.
func (p *provider) parseID(id string) (endpoint, path, machine string, err error) {
	rest, machine, ok := strings.Cut(id, "#")
	if ok && machine != "" {
		for _, e := range p.params.Endpoints {
			if path, ok := strings.CutPrefix(rest, e); ok && strings.HasPrefix(path, "/redfish/v1/Systems/") {
				return e, path, machine, nil
			}
		}
	}
	return "", "", "", fmt.Errorf("redfish: %q is not a system of this class's endpoints: %w", id, provision.ErrNotFound)
}

// lookup reads the system a provider id names, failing with ErrNotFound when it no longer
// exists or is no longer claimed by the id's machine; done closes its client.
func (p *provider) lookup(ctx context.Context, id string) (system, claim, func(), error) {
	endpoint, path, machine, err := p.parseID(id)
	if err != nil {
		return system{}, claim{}, nil, err
	}
	c, err := p.connect(ctx, endpoint)
	if err != nil {
		return system{}, claim{}, nil, err
	}
	sys, err := schemas.GetComputerSystem(c, path)
	if err != nil {
		disconnect(c)
		if isNotFound(err) {
			return system{}, claim{}, nil, fmt.Errorf("redfish: system %s: %w", path, provision.ErrNotFound)
		}
		return system{}, claim{}, nil, fmt.Errorf("redfish: read system %s: %w", path, err)
	}
	s := system{endpoint: endpoint, c: c, sys: sys}
	cl, ok, err := p.readClaim(s)
	if err != nil {
		disconnect(c)
		return system{}, claim{}, nil, err
	}
	if !ok || cl.Machine != machine {
		disconnect(c)
		return system{}, claim{}, nil, fmt.Errorf("redfish: system %s is no longer machine %s's: %w", path, machine, provision.ErrNotFound)
	}
	return s, cl, func() { disconnect(c) }, nil
}

func isNotFound(err error) bool {
	var re *schemas.Error
	return errors.As(err, &re) && re.HTTPReturnedStatusCode == http.StatusNotFound
}

// machine is the provider's view of a claimed system.
func machine(s system, cl claim) provision.Machine {
	st := provision.ProviderPending
	switch s.sys.PowerState {
	case schemas.OnPowerState:
		st = provision.ProviderRunning
	case schemas.OffPowerState, schemas.PoweringOffPowerState:
		st = provision.ProviderStopped
	}
	return provision.Machine{ProviderID: s.id(cl.Machine), Tags: cl.tags(), State: st}
}
