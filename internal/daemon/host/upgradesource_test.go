package host_test

import (
	"context"
	"strings"
	"testing"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon/host"
)

func TestParseUpgradeSource(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		"https://releases.example.com", "https://releases.example.com/", "https://releases.example.com/bcd/",
		"https://releases.example.com:8443/a/b", "http://127.0.0.1:8080/releases/", "http://[::1]/r",
	} {
		if _, err := host.ParseUpgradeSource(ok); err != nil {
			t.Errorf("ParseUpgradeSource(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "releases.example.com/bcd", "ftp://releases.example.com/", "http://releases.example.com/",
		"http://localhost/r", "http://10.0.0.1/r", "https://user:pw@releases.example.com/",
		"https://releases.example.com/bcd?x=1", "https://releases.example.com/bcd#f",
		"https://releases.example.com/a/../b", "https://releases.example.com//a", "https:///a",
		"https://releases.example.com/a%2fb/", "https://" + strings.Repeat("a", host.MaxUpgradeURL),
	} {
		if _, err := host.ParseUpgradeSource(bad); err == nil {
			t.Errorf("ParseUpgradeSource(%q) accepted", bad)
		}
	}
	if _, err := host.ParseUpgradeSources(make([]string, host.MaxUpgradeSources+1)); err == nil {
		t.Error("more than MaxUpgradeSources accepted")
	}
}

// TestUpgradeSourceMatch checks which URLs a source covers, through Upgrade: an upgrader that
// does not know its binary checks the URL and then stops, so nothing is ever fetched.
func TestUpgradeSourceMatch(t *testing.T) {
	t.Parallel()
	sources, err := host.ParseUpgradeSources([]string{"https://releases.example.com/bcd/", "https://cdn.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	u := &host.Upgrader{Sources: sources}
	refused := func(url string) bool {
		t.Helper()
		p := &daemonv1.UpgradePayload{Url: url, Sha256: strings.Repeat("0", 64)}
		_, err := u.Upgrade(context.Background(), p)
		if err == nil || !strings.Contains(err.Error(), "nothing fetched") && !strings.Contains(err.Error(), "does not know its own binary") {
			t.Fatalf("%s: %v", url, err)
		}
		return strings.Contains(err.Error(), "nothing fetched")
	}
	for _, in := range []string{
		"https://releases.example.com/bcd/bcd-v1", "https://RELEASES.example.com:443/bcd/v1/bcd",
		"https://releases.example.com/bcd/bcd-v1?sig=abc", "https://cdn.example.com/x/y",
	} {
		if refused(in) {
			t.Errorf("%s refused", in)
		}
	}
	for _, out := range []string{
		"https://releases.example.com.evil.com/bcd/bcd-v1", "https://releases.example.com/bcd-evil/x",
		"https://releases.example.com/bcd/../etc/x", "https://releases.example.com/bcd/%2e%2e/x",
		"https://releases.example.com/bcd%2f..%2fx", "https://releases.example.com/bcd//x",
		"http://releases.example.com/bcd/bcd-v1", "https://releases.example.com:8443/bcd/bcd-v1",
		"https://user@releases.example.com/bcd/bcd-v1", "https://releases.example.com/bcd/x#f",
		"https://releases.example.com/other", "https://evil.com/bcd/bcd-v1", "file:///bcd/bcd-v1",
		"https://releases.example.com/bcd/x\\..\\y",
	} {
		if !refused(out) {
			t.Errorf("%s accepted", out)
		}
	}
}
