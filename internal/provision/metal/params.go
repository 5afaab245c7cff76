package metal

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/better-compute/better-compute/internal/provision"
)

// Bounds of a class's parameters.
const (
	maxEndpoints  = 64
	maxSystems    = 1024
	maxImageLen   = 2048
	minTimeout    = time.Second
	maxTimeout    = 5 * time.Minute
	defaultTimout = 30 * time.Second
)

// Boot modes.
const (
	// BootVirtualMedia inserts the class's image into the system's virtual media device and boots
	// from it once; the image URL carries the machine's boot configuration URL.
	BootVirtualMedia = "virtualMedia"
	// BootPXE boots from the network once; the PXE infrastructure hands the machine its boot
	// configuration.
	BootPXE = "pxe"
)

// The placeholders of an image URL template, each replaced by its value, query-escaped.
const (
	placeholderBootConfigURL = "{bootConfigURL}"
	placeholderMachine       = "{machine}"
	placeholderName          = "{name}"
)

// Params are a redfish class's parameters.
type Params struct {
	// Endpoints are the BMCs' Redfish service roots (https://bmc.example:443): each manages the
	// systems it lists under /redfish/v1/Systems.
	Endpoints []string `json:"endpoints"`
	// Systems are the ids of the systems (the last segment of their path) the class may use;
	// empty for every system of the endpoints.
	Systems []string `json:"systems,omitempty"`
	// Boot is how a claimed system boots.
	Boot Boot `json:"boot"`
	// InsecureSkipVerify accepts a BMC certificate that does not verify. Only when set.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// Timeout bounds each request to a BMC: 1s to 5m, default 30s.
	Timeout Duration `json:"timeout,omitempty"`
}

// Boot is how a claimed system boots.
type Boot struct {
	// Mode is BootVirtualMedia or BootPXE.
	Mode string `json:"mode"`
	// Image is the virtual media's URL template (virtualMedia): an http or https URL that must
	// contain {bootConfigURL}, and may contain {machine} and {name}.
	Image string `json:"image,omitempty"`
	// Device is the virtual media device's id: Cd (default) or UsbCd-like ids a BMC lists.
	Device string `json:"device,omitempty"`
}

// Credentials are a redfish class's credentials, the BMCs' account (HTTP basic auth).
type Credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

// UnmarshalJSON reads "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`must be a duration such as "30s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf(`must be a duration such as "30s": %w`, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes "30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// parseParams decodes and validates a class's parameters and fills the defaults; the endpoints
// must pass egress's checks.
func parseParams(raw json.RawMessage, egress provision.Egress) (Params, error) {
	var p Params
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("redfish parameters: %w", err)
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(p.Endpoints) == 0 || len(p.Endpoints) > maxEndpoints {
		bad("endpoints: list 1 to %d Redfish service roots", maxEndpoints)
	}
	for i, e := range p.Endpoints {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			bad("endpoints[%d]: must be a Redfish service root, http(s)://host[:port]", i)
			continue
		}
		if err := egress.CheckEndpoint(e); err != nil {
			errs = append(errs, &provision.FieldError{Field: fmt.Sprintf("endpoints[%d]", i), Err: err})
			continue
		}
		p.Endpoints[i] = u.Scheme + "://" + u.Host
	}
	if len(p.Systems) > maxSystems {
		bad("systems: at most %d", maxSystems)
	}
	for i, s := range p.Systems {
		if s == "" || len(s) > 255 || strings.ContainsAny(s, "/?#") {
			bad("systems[%d]: must be a system's id, the last segment of its path", i)
		}
	}
	switch p.Boot.Mode {
	case BootVirtualMedia:
		if p.Boot.Device == "" {
			p.Boot.Device = "Cd"
		}
		if err := checkImage(p.Boot.Image); err != nil {
			bad("boot.image: %v", err)
		}
	case BootPXE:
		if p.Boot.Image != "" || p.Boot.Device != "" {
			bad("boot: pxe takes no image or device")
		}
	default:
		bad("boot.mode: must be %q or %q", BootVirtualMedia, BootPXE)
	}
	if len(p.Boot.Device) > 64 || strings.ContainsAny(p.Boot.Device, "/?#") {
		bad("boot.device: must be a virtual media device's id, such as Cd")
	}
	switch t := time.Duration(p.Timeout); {
	case t == 0:
		p.Timeout = Duration(defaultTimout)
	case t < minTimeout || t > maxTimeout:
		bad("timeout: must be 1s to 5m")
	}
	if err := errors.Join(errs...); err != nil {
		return p, fmt.Errorf("redfish parameters: %w", err)
	}
	return p, nil
}

// checkImage checks an image URL template renders to an http(s) URL that carries the boot
// configuration URL.
func checkImage(tmpl string) error {
	if !strings.Contains(tmpl, placeholderBootConfigURL) {
		return fmt.Errorf("must contain %s, through which the machine fetches its join token", placeholderBootConfigURL)
	}
	if len(tmpl) > maxImageLen {
		return fmt.Errorf("at most %d characters", maxImageLen)
	}
	u, err := url.Parse(renderImage(tmpl, "https://api.example/api/machines/bootConfig?ticket=t", "m", "n"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return errors.New("must be an http or https URL without a fragment (#…)")
	}
	return nil
}

// renderImage fills an image URL template.
func renderImage(tmpl, bootConfigURL, machine, name string) string {
	return strings.NewReplacer(
		placeholderBootConfigURL, url.QueryEscape(bootConfigURL),
		placeholderMachine, url.QueryEscape(machine),
		placeholderName, url.QueryEscape(name),
	).Replace(tmpl)
}

// parseCredentials decodes the class's credentials.
func parseCredentials(raw []byte) (Credentials, error) {
	var c Credentials
	if len(raw) == 0 {
		return c, errors.New(`redfish credentials: required, {"username": "…", "password": "…"}`)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf(`redfish credentials: want {"username": "…", "password": "…"}: %w`, err)
	}
	if c.Username == "" || len(c.Username) > 256 || len(c.Password) > 1024 {
		return c, errors.New("redfish credentials: username is required (at most 256 characters), password at most 1024")
	}
	return c, nil
}
