package webhook

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// receiver is a webhook endpoint that verifies every request, answers 204 to those it accepts
// and counts them.
type receiver struct {
	t      testing.TB
	secret atomic.Pointer[string]
	srv    *httptest.Server
	n      atomic.Int64
}

func newReceiver(t testing.TB) *receiver {
	t.Helper()
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setSecret(s string) { r.secret.Store(&s) }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := Verify(*r.secret.Load(), req.Header, body); err != nil {
		r.t.Errorf("receiver: %v", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	r.n.Add(1)
	w.WriteHeader(http.StatusNoContent)
}

// unique counts the messages received.
func (r *receiver) unique() int { return int(r.n.Load()) }

func TestSignAndVerify(t *testing.T) {
	t.Parallel()
	// The example of the Standard Webhooks reference libraries.
	const (
		secret  = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		id      = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		payload = `{"test": 2432232314}`
		want    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	ts := time.Unix(1614265330, 0)
	sig, err := Sign(secret, id, ts, []byte(payload))
	if err != nil || sig != want {
		t.Fatalf("Sign = %q, %v; want %q", sig, err, want)
	}
	h := http.Header{}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, "1614265330")
	h.Set(HeaderSignature, "v1,bm90IHRoaXMgb25l "+sig) // a rotated-out key's signature first
	if err := verifyAt(secret, h, []byte(payload), ts.Add(time.Minute)); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := verifyAt(secret, h, []byte(`{"test": 2432232315}`), ts); !errors.Is(err, ErrSignature) {
		t.Errorf("tampered body: %v", err)
	}
	if err := verifyAt(NewSecret(), h, []byte(payload), ts); !errors.Is(err, ErrSignature) {
		t.Errorf("wrong secret: %v", err)
	}
	h2 := h.Clone()
	h2.Set(HeaderID, "msg_other")
	if err := verifyAt(secret, h2, []byte(payload), ts); !errors.Is(err, ErrSignature) {
		t.Errorf("other id: %v", err)
	}
	if err := verifyAt(secret, h, []byte(payload), ts.Add(10*time.Minute)); !errors.Is(err, ErrTimestamp) {
		t.Errorf("old timestamp: %v", err)
	}
	if err := Verify(secret, http.Header{}, []byte(payload)); !errors.Is(err, ErrMissingHeaders) {
		t.Errorf("no headers: %v", err)
	}
	// And through the real thing, a signed POST of a fresh secret.
	s := NewSecret()
	if k, _ := secretKey(s); !strings.HasPrefix(s, SecretPrefix) || len(k) != 32 {
		t.Fatalf("secret %q", s)
	}
	rcv := newReceiver(t)
	rcv.setSecret(s)
	body, _ := Body("test", "", time.Now(), []byte(`{"seq":1}`))
	if r := Post(t.Context(), NewClient(true, 1), rcv.srv.URL, s, "evt_1", body, time.Second); r.Err != nil || r.StatusCode != http.StatusNoContent {
		t.Fatalf("post: %+v", r)
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	refused := []string{
		"", "ftp://example.com/", "example.com/hook", "https://", "https:///path", "http://user:pw@example.com/",
		"mailto:someone@example.com",
		"http://" + strings.Repeat("a", MaxURLLength) + ".com/",
	}
	private := []string{
		"http://127.0.0.1:8080/hook", "http://localhost/", "http://LOCALHOST./", "http://api.localhost/",
		"http://169.254.169.254/latest/meta-data", "http://[::1]/", "http://[fe80::1%25eth0]/", "http://10.1.2.3/",
		"http://172.16.0.1/", "http://192.168.1.1/", "http://0.0.0.0/", "http://[::]/", "http://224.0.0.1/",
		"http://100.100.100.200/", "http://[::ffff:127.0.0.1]/", "http://[64:ff9b::a9fe:a9fe]/",
		"http://2130706433/", "http://127.1/", "http://0x7f.0.0.1/",
	}
	public := []string{"https://example.com/hook", "http://8.8.8.8:8080/x?y=1", "https://[2606:4700::1111]/", "https://1.example/"}
	for _, u := range refused {
		if CheckURL(u, true) == nil {
			t.Errorf("CheckURL(%q) accepted", u)
		}
	}
	for _, u := range private {
		if err := CheckURL(u, false); err == nil {
			t.Errorf("CheckURL(%q, private refused) accepted", u)
		}
		if strings.Contains(u, "0x7f") || strings.Contains(u, "127.1/") || strings.Contains(u, "2130706433") {
			continue // not addresses, and not names either
		}
		if err := CheckURL(u, true); err != nil {
			t.Errorf("CheckURL(%q, private allowed) = %v", u, err)
		}
	}
	for _, u := range public {
		if err := CheckURL(u, false); err != nil {
			t.Errorf("CheckURL(%q) = %v", u, err)
		}
	}
	for _, a := range []string{"127.0.0.1", "::1", "169.254.1.1", "fd00::1", "100.64.0.1"} {
		if !PrivateAddr(netip.MustParseAddr(a)) {
			t.Errorf("PrivateAddr(%s) = false", a)
		}
	}
}

// TestDialRefusesPrivateAddresses: without AllowPrivate, a name that resolves to loopback is
// refused at connection time, after DNS, not only literal addresses in the URL.
func TestDialRefusesPrivateAddresses(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t)
	rcv.setSecret(NewSecret())
	port := rcv.srv.URL[strings.LastIndex(rcv.srv.URL, ":")+1:]
	for _, u := range []string{rcv.srv.URL, "http://localhost:" + port + "/"} {
		r := Post(t.Context(), NewClient(false, 1), u, NewSecret(), "evt_1", []byte("{}"), 5*time.Second)
		if !errors.Is(r.Err, ErrPrivateAddress) || r.StatusCode != 0 {
			t.Errorf("POST %s without allowPrivate: %+v", u, r)
		}
	}
	if rcv.unique() != 0 {
		t.Fatal("the receiver was reached")
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://example.com/hooks/abc?token=x": "https://example.com/[redacted]",
		"https://example.com:8443/":             "https://example.com:8443",
		"http://example.com":                    "http://example.com",
		"https://example.com?t=1":               "https://example.com/[redacted]",
		"not a url":                             "[redacted]",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
