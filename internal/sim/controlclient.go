package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
)

// maxControlResponse bounds a control answer: a snapshot of gpuhealth.MaxSignals signals fits.
const maxControlResponse = 8 << 20

// ControlClient calls a simulator's control API over its unix socket (ListenControl).
type ControlClient struct {
	path string
	hc   *http.Client
}

// NewControlClient is a client of the control socket at path.
func NewControlClient(path string) *ControlClient {
	var d net.Dialer
	return &ControlClient{path: path, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "unix", path) },
	}}}
}

// Inject makes a machine report a GPU signal; it returns the machine's GPU health after it.
func (c *ControlClient) Inject(ctx context.Context, req InjectRequest) (GPUHealthResponse, error) {
	return c.call(ctx, http.MethodPost, ControlInjectPath, req)
}

// Clear removes every GPU signal of a machine.
func (c *ControlClient) Clear(ctx context.Context, hostname string) (GPUHealthResponse, error) {
	return c.call(ctx, http.MethodPost, ControlClearPath, ClearRequest{Hostname: hostname})
}

// Health is the GPU health a machine reports now.
func (c *ControlClient) Health(ctx context.Context, hostname string) (GPUHealthResponse, error) {
	return c.call(ctx, http.MethodGet, ControlHealthPath+"?"+url.Values{"hostname": {hostname}}.Encode(), nil)
}

// Load sets the load profile of a machine's GPU (every GPU with req.GPU nil); it returns the
// machine's GPU loads after it.
func (c *ControlClient) Load(ctx context.Context, req LoadRequest) (LoadResponse, error) {
	var out LoadResponse
	err := c.do(ctx, http.MethodPost, ControlLoadPath, req, &out)
	return out, err
}

func (c *ControlClient) call(ctx context.Context, method, path string, body any) (GPUHealthResponse, error) {
	var out GPUHealthResponse
	err := c.do(ctx, method, path, body, &out)
	return out, err
}

// do makes one control call with body (JSON; none when nil) and decodes its answer into out.
func (c *ControlClient) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("sim control: encode the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://sim"+path, rd)
	if err != nil {
		return fmt.Errorf("sim control: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("sim control socket %s: %w (is `better-compute sim --control` or `better-compute dev --sim` running?)", c.path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxControlResponse))
	if err != nil {
		return fmt.Errorf("sim control socket %s: read the answer: %w", c.path, err)
	}
	if res.StatusCode != http.StatusOK {
		var e ControlError
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			return fmt.Errorf("sim control socket %s: %s", c.path, res.Status)
		}
		return fmt.Errorf("sim control: %s", e.Error)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("sim control socket %s: decode the answer: %w", c.path, err)
	}
	return nil
}
