package metal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/daemon"
)

// machines plays the operating system the emulator's systems boot: a system that is powered on
// with the class's image inserted boots it once, reads the boot configuration URL from the
// image's URL (the config parameter), fetches the configuration once and joins with a
// FakeDaemon. A system powered off stops its daemon; powered on again with new media, it boots
// anew.
type machines struct {
	t      *testing.T
	em     *emulator
	images string
	mu     sync.Mutex
	booted map[string]string // system → the image it booted
	// fetches counts the boot configuration fetches, by system.
	fetches map[string]int
}

func newMachines(t *testing.T, em *emulator, images string) *machines {
	t.Helper()
	return &machines{t: t, em: em, images: images, booted: map[string]string{}, fetches: map[string]int{}}
}

// run watches the emulator until the test ends.
func (h *machines) run() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	daemons := map[string]context.CancelFunc{}
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, id := range h.em.systems {
				st, err := h.em.read(ctx, id)
				if err != nil {
					continue
				}
				h.mu.Lock()
				booted, running := h.booted[id]
				h.mu.Unlock()
				switch {
				case st.Power != "On" && running:
					daemons[id]()
					delete(daemons, id)
					h.mu.Lock()
					delete(h.booted, id)
					h.mu.Unlock()
				case st.Power == "On" && st.Inserted && st.Target == "Cd" && strings.HasPrefix(st.Image, h.images+"/") && booted != st.Image:
					dctx, stop := context.WithCancel(ctx)
					daemons[id] = stop
					h.mu.Lock()
					h.booted[id] = st.Image
					h.mu.Unlock()
					wg.Go(func() { h.boot(dctx, id, st.Image) })
				}
			}
		}
	})
	h.t.Cleanup(func() { cancel(); wg.Wait() })
}

// boot fetches the boot configuration the image's URL names and runs a FakeDaemon with it.
func (h *machines) boot(ctx context.Context, id, image string) {
	u, err := url.Parse(image)
	if err != nil {
		h.t.Errorf("system %s: image %q: %v", id, image, err)
		return
	}
	cfgURL := u.Query().Get("config")
	cu, err := url.Parse(cfgURL)
	if err != nil || cfgURL == "" {
		h.t.Errorf("system %s: image %q carries no boot configuration URL", id, image)
		return
	}
	h.mu.Lock()
	h.fetches[id]++
	h.mu.Unlock()
	cfg, err := fetchBootConfig(ctx, cfgURL, cu.Query().Get("ticket"))
	if err != nil {
		if ctx.Err() == nil {
			h.t.Errorf("system %s: %v", id, err)
		}
		return
	}
	f, err := daemon.JoinFake(ctx, []byte(cfg.RootCAPEM), cfg.JoinToken, u.Query().Get("host"), daemon.FakeOptions{Dialer: daemon.Dialer{Gateway: cfg.GatewayEndpoint}})
	if err != nil {
		if ctx.Err() == nil {
			h.t.Errorf("system %s: join: %v", id, err)
		}
		return
	}
	if err := f.Run(ctx); err != nil && ctx.Err() == nil {
		h.t.Errorf("system %s: daemon: %v", id, err)
	}
}

// bootConfig is machines/bootConfig's JSON answer.
type bootConfig struct {
	MachineID       string `json:"machineId"`
	JoinToken       string `json:"joinToken"`
	GatewayEndpoint string `json:"gatewayEndpoint"`
	RootCAPEM       string `json:"rootCaPem"`
}

// fetchBootConfig does what a booted machine's script does: POST the URL's ticket to the URL.
func fetchBootConfig(ctx context.Context, cfgURL, ticket string) (bootConfig, error) {
	body, _ := json.Marshal(map[string]string{"ticket": ticket})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfgURL, bytes.NewReader(body))
	if err != nil {
		return bootConfig{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return bootConfig{}, fmt.Errorf("fetch the boot configuration: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != http.StatusOK {
		return bootConfig{}, fmt.Errorf("fetch the boot configuration: %s: %s", res.Status, b)
	}
	var c bootConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return bootConfig{}, fmt.Errorf("decode the boot configuration: %w", err)
	}
	return c, nil
}

// read is state without failing the test (the harness runs beside it).
func (e *emulator) read(ctx context.Context, id string) (state, error) {
	var sys struct {
		PowerState string
		Boot       struct{ BootSourceOverrideTarget string }
	}
	var media struct {
		Image    string
		Inserted bool
	}
	for path, v := range map[string]any{"/redfish/v1/Systems/" + id: &sys, "/redfish/v1/Systems/" + id + "/VirtualMedia/Cd": &media} {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+path, nil)
		if err != nil {
			return state{}, err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return state{}, err
		}
		err = json.NewDecoder(res.Body).Decode(v)
		_ = res.Body.Close()
		if err != nil {
			return state{}, err
		}
	}
	return state{Power: sys.PowerState, Target: sys.Boot.BootSourceOverrideTarget, Image: media.Image, Inserted: media.Inserted}, nil
}
