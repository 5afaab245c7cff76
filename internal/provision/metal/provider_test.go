package metal

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/provision"
)

// TestFactoryValidates: the factory refuses parameters and credentials that are missing, out of
// bounds or unknown, without reaching a BMC.
func TestFactoryValidates(t *testing.T) {
	t.Parallel()
	good := `{"endpoints": ["https://bmc.example"], "boot": {"mode": "virtualMedia", "image": "https://img.example/bc.iso?c={bootConfigURL}"}}`
	if _, err := Factory(json.RawMessage(good), testCredentials, testEgress); err != nil {
		t.Fatalf("good parameters: %v", err)
	}
	pxe := `{"endpoints": ["https://bmc.example"], "systems": ["s1"], "boot": {"mode": "pxe"}, "insecureSkipVerify": true, "timeout": "1m"}`
	if _, err := Factory(json.RawMessage(pxe), testCredentials, testEgress); err != nil {
		t.Fatalf("pxe parameters: %v", err)
	}
	for _, tc := range []struct{ name, params, want string }{
		{"no endpoint", `{"boot": {"mode": "pxe"}}`, "endpoints"},
		{"endpoint with a path", `{"endpoints": ["https://bmc.example/redfish/v1"], "boot": {"mode": "pxe"}}`, "endpoints[0]"},
		{"endpoint not http", `{"endpoints": ["ftp://bmc.example"], "boot": {"mode": "pxe"}}`, "endpoints[0]"},
		{"unknown mode", `{"endpoints": ["https://bmc.example"], "boot": {"mode": "floppy"}}`, "boot.mode"},
		{"image without the boot config URL", `{"endpoints": ["https://bmc.example"], "boot": {"mode": "virtualMedia", "image": "https://img.example/bc.iso"}}`, "{bootConfigURL}"},
		{"image with a fragment", `{"endpoints": ["https://bmc.example"], "boot": {"mode": "virtualMedia", "image": "https://img.example/bc.iso?c={bootConfigURL}#x"}}`, "fragment"},
		{"pxe with an image", `{"endpoints": ["https://bmc.example"], "boot": {"mode": "pxe", "image": "https://img.example/{bootConfigURL}"}}`, "pxe takes no image"},
		{"system with a slash", `{"endpoints": ["https://bmc.example"], "systems": ["a/b"], "boot": {"mode": "pxe"}}`, "systems[0]"},
		{"timeout too long", `{"endpoints": ["https://bmc.example"], "boot": {"mode": "pxe"}, "timeout": "1h"}`, "timeout"},
		{"unknown key", `{"endpoints": ["https://bmc.example"], "boot": {"mode": "pxe"}, "verify": false}`, "unknown field"},
	} {
		if _, err := Factory(json.RawMessage(tc.params), testCredentials, testEgress); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error about %s", tc.name, err, tc.want)
		}
	}
	for _, creds := range []string{"", `{"password": "x"}`, `{"username": "a", "token": "x"}`} {
		if _, err := Factory(json.RawMessage(good), []byte(creds), testEgress); err == nil {
			t.Errorf("credentials %q: accepted", creds)
		}
	}
}

// testEgress allows the loopback emulators of the tests.
var testEgress = provision.Egress{AllowPrivate: true}

func createRequest(machine, deployment string) provision.CreateRequest {
	return provision.CreateRequest{
		ClientToken: machine, Name: "m-" + machine[:4],
		Tags: map[string]string{provision.TagMachine: machine, provision.TagDeployment: deployment},
		Join: provision.Join{BootConfigURL: "https://api.example/api/machines/bootConfig?ticket=bcb_" + machine + "_secret"},
	}
}

// TestProviderAgainstEmulator: Create claims a free system, inserts the image carrying the boot
// configuration URL, sets the boot override and powers it on; a second Create with the same
// client token returns the same system; List shows each claimed system with its machine and
// deployment; Delete powers it off, clears the override, ejects the media and releases it, after
// which Get finds nothing and Delete succeeds again; with every system claimed Create fails.
func TestProviderAgainstEmulator(t *testing.T) {
	t.Parallel()
	em := startEmulator(t, 2)
	images := imageServer(t)
	p, err := Factory(testParams(em, images), testCredentials, testEgress)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const a, b, c = "0192f7a0-0000-7000-8000-00000000000a", "0192f7a0-0000-7000-8000-00000000000b", "0192f7a0-0000-7000-8000-00000000000c"

	ma, err := p.Create(ctx, createRequest(a, "one.example"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := p.Create(ctx, createRequest(a, "one.example"))
	if err != nil || again.ProviderID != ma.ProviderID {
		t.Fatalf("second Create: %+v, %v; want %s again", again, err, ma.ProviderID)
	}
	sysA := ma.ProviderID[strings.LastIndex(ma.ProviderID[:strings.Index(ma.ProviderID, "#")], "/")+1 : strings.Index(ma.ProviderID, "#")]
	em.awaitPower(t, sysA, "On")
	st := em.state(t, sysA)
	if st.Target != "Cd" || !st.Inserted || !strings.HasPrefix(st.Image, images+"/bc.iso?config=https%3A%2F%2Fapi.example%2Fapi%2Fmachines%2FbootConfig%3Fticket%3Dbcb_"+a) ||
		!strings.HasSuffix(st.Image, "#better-compute=one.example/"+a) {
		t.Fatalf("system %s after Create: %+v", sysA, st)
	}

	mb, err := p.Create(ctx, createRequest(b, "two.example"))
	if err != nil {
		t.Fatal(err)
	}
	if mb.ProviderID == ma.ProviderID {
		t.Fatalf("two machines on one system %s", mb.ProviderID)
	}
	if _, err := p.Create(ctx, createRequest(c, "one.example")); err == nil || !strings.Contains(err.Error(), "free") {
		t.Fatalf("Create with every system claimed: %v", err)
	}
	list, err := p.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("List: %+v, %v; want both systems", list, err)
	}
	for _, m := range list {
		want := map[string]string{ma.ProviderID: "one.example", mb.ProviderID: "two.example"}[m.ProviderID]
		if m.Tags[provision.TagDeployment] != want || !strings.HasSuffix(m.ProviderID, "#"+m.Tags[provision.TagMachine]) {
			t.Fatalf("listed %+v: want deployment %q and its machine", m, want)
		}
	}
	got, err := p.Get(ctx, ma.ProviderID)
	if err != nil || got.Tags[provision.TagMachine] != a || got.State != provision.ProviderRunning {
		t.Fatalf("Get: %+v, %v", got, err)
	}
	if err := p.Power(ctx, ma.ProviderID, provision.PowerReset); err != nil {
		t.Fatal(err)
	}
	// The fake driver shows a restarting system off until it is on again.
	em.awaitPower(t, sysA, "On")

	if err := p.Delete(ctx, ma.ProviderID); err != nil {
		t.Fatal(err)
	}
	em.awaitPower(t, sysA, "Off")
	if st := em.state(t, sysA); st.Inserted || st.Image != "" || st.Target != "None" {
		t.Fatalf("system %s after Delete: %+v; want no media, no override", sysA, st)
	}
	if _, err := p.Get(ctx, ma.ProviderID); !errors.Is(err, provision.ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want not found", err)
	}
	if err := p.Delete(ctx, ma.ProviderID); err != nil {
		t.Fatalf("second Delete: %v", err)
	}
	if err := p.Power(ctx, ma.ProviderID, provision.PowerOn); !errors.Is(err, provision.ErrNotFound) {
		t.Fatalf("Power after Delete: %v, want not found", err)
	}
	list, err = p.List(ctx)
	if err != nil || len(list) != 1 || list[0].ProviderID != mb.ProviderID {
		t.Fatalf("List after Delete: %+v, %v; want only %s", list, err, mb.ProviderID)
	}
	// The released system is free again once it is off.
	mc, err := p.Create(ctx, createRequest(c, "one.example"))
	if err != nil || !strings.Contains(mc.ProviderID, sysA) {
		t.Fatalf("Create after the release: %+v, %v; want system %s", mc, err, sysA)
	}
}
