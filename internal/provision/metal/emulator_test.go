package metal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/poll"
)

// emulatorsVenv is where scripts/setup installs the emulators, relative to the repository.
const emulatorsVenv = ".venv-emulators"

// sushyEmulator finds sushy-tools' emulator in the repository's emulator virtualenv. A missing
// emulator fails the test, so that a machine without it does not pass by testing nothing.
func sushyEmulator(t *testing.T) string {
	t.Helper()
	if dir, err := filepath.Abs("../../.."); err == nil {
		p := filepath.Join(dir, emulatorsVenv, "bin", "sushy-emulator")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	t.Fatalf("sushy-emulator not found in %s/bin: the redfish provider's tests run against sushy-tools' Redfish emulator; run scripts/setup, which installs it from scripts/emulators-requirements.txt", emulatorsVenv)
	return ""
}

// emulator is a sushy-tools Redfish emulator with the fake driver, serving n systems, all
// powered off, until the test ends.
type emulator struct {
	URL     string
	systems []string
}

// systemID is the id of the emulator's system i.
func systemID(i int) string { return fmt.Sprintf("11111111-0000-4000-8000-%012d", i+1) }

func startEmulator(t *testing.T, n int) *emulator {
	t.Helper()
	bin := sushyEmulator(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	e := &emulator{URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	var conf strings.Builder
	conf.WriteString("SUSHY_EMULATOR_FAKE_SYSTEMS = [\n")
	for i := range n {
		e.systems = append(e.systems, systemID(i))
		fmt.Fprintf(&conf, "  {'uuid': '%s', 'name': 'node-%d', 'power_state': 'Off', 'nics': [{'mac': '00:5c:52:31:3a:%02x', 'ip': '172.22.0.%d'}]},\n", systemID(i), i, i+1, i+10)
	}
	conf.WriteString("]\n")
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sushy.conf")
	if err := os.WriteFile(cfg, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return logs.Write(p) })
	cmd := exec.Command(bin, "--fake", "--config", cfg, "-i", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sushy-emulator: %v", err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			mu.Lock()
			t.Logf("sushy-emulator:\n%s", logs.String())
			mu.Unlock()
		}
	})
	client := &http.Client{Timeout: time.Second}
	poll.Until(t, 60*time.Second, "sushy-emulator to answer on "+e.URL, func() bool {
		select {
		case <-exited:
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("sushy-emulator exited: %v\n%s", waitErr, logs.String())
		default:
		}
		res, err := client.Get(e.URL + "/redfish/v1/Systems")
		if err != nil {
			return false
		}
		_ = res.Body.Close()
		return res.StatusCode == http.StatusOK
	}, poll.Every(100*time.Millisecond))
	return e
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// state is a system as the emulator shows it, read without gofish.
type state struct {
	Power    string
	Target   string
	Image    string
	Inserted bool
}

func (e *emulator) state(t *testing.T, id string) state {
	t.Helper()
	st, err := e.read(t.Context(), id)
	if err != nil {
		t.Fatalf("read system %s from the emulator: %v", id, err)
	}
	return st
}

// awaitPower waits for the emulator to show the system in power state want (the fake driver
// applies power changes 1 to 11 seconds after they are asked for).
func (e *emulator) awaitPower(t *testing.T, id, want string) {
	t.Helper()
	poll.Until(t, 30*time.Second, "system "+id+" power "+want, func() bool { return e.state(t, id).Power == want },
		poll.Every(200*time.Millisecond))
}

// imageServer serves the boot image the emulator fetches when media is inserted.
func imageServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write([]byte("an ISO image"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// testParams are a virtual media class's parameters against the emulator.
func testParams(em *emulator, images string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"endpoints": []string{em.URL},
		"boot":      map[string]any{"mode": BootVirtualMedia, "image": images + "/bc.iso?config={bootConfigURL}&host={name}"},
		"timeout":   "10s",
	})
	return b
}

// testCredentials are the emulator's: it does not check them.
var testCredentials = []byte(`{"username": "admin", "password": "password"}`)
