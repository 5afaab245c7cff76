// Package webhook is the wire format of Better Compute's webhooks, shared by the API (which
// creates webhooks, checks their URLs, seals their signing secrets and sends test messages) and
// the sinks workers (which deliver the outbox to them): Standard Webhooks signing and
// verification, the message body, the sealing of secrets, the URL checks that keep deliveries off
// private addresses, URL redaction, and the names and states the two sides both read. It imports
// only the standard library and plumbing.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/seal"
)

// Webhook deliveries follow the Standard Webhooks specification (https://www.standardwebhooks.com):
// a POST of a JSON body {"type", "timestamp", "subject", "data"} with the headers
//
//	webhook-id:        the event's id, the same on every attempt ("evt_<outbox id>")
//	webhook-timestamp: unix seconds of the attempt
//	webhook-signature: "v1," + base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))
//
// where the secret is "whsec_" + base64(key). Any 2xx answer is a delivery; anything else,
// redirects included, is a failure to retry.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
	// SecretPrefix starts every signing secret.
	SecretPrefix = "whsec_"
	// Tolerance is how far a webhook-timestamp may be from the receiver's clock in Verify.
	Tolerance = 5 * time.Minute
	// secretBytes is the length of generated keys (the specification asks for 24 to 64).
	secretBytes = 32
)

// sealPurpose keeps webhook secrets' ciphertexts apart from every other sealed value.
const sealPurpose = "webhook"

// NewSealer returns the sealer of webhook secrets, from the deployment secret.
func NewSealer(deploymentSecret string) (*seal.Sealer, error) {
	return seal.New(deploymentSecret, sealPurpose)
}

// SealSecret seals a webhook's signing secret for storage, bound to the webhook's id.
func SealSecret(s *seal.Sealer, webhookID uuid.UUID, secret string) []byte {
	return s.Seal([]byte(secret), webhookID[:])
}

// OpenSecret opens a secret sealed by SealSecret for the same webhook.
func OpenSecret(s *seal.Sealer, webhookID uuid.UUID, sealed []byte) (string, error) {
	b, err := s.Open(sealed, webhookID[:])
	return string(b), err
}

// NewSecret returns a new signing secret: "whsec_" and the base64 of 32 random bytes.
func NewSecret() string {
	b := make([]byte, secretBytes)
	_, _ = rand.Read(b)
	return SecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Key is the HMAC key of a signing secret, decoded once for a sink that sends many messages.
type Key []byte

// ParseSecret returns the key of a signing secret ("whsec_" and base64).
func ParseSecret(secret string) (Key, error) { return secretKey(secret) }

// secretKey returns the HMAC key of a secret.
func secretKey(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, SecretPrefix))
	if err != nil || len(k) == 0 {
		return nil, errors.New("webhook secret: want \"whsec_\" and base64")
	}
	return k, nil
}

func sign(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Sign returns the webhook-signature of a message: "v1," and the base64 HMAC-SHA256 of
// "{id}.{timestamp}.{body}".
func Sign(secret, id string, timestamp time.Time, body []byte) (string, error) {
	key, err := secretKey(secret)
	if err != nil {
		return "", err
	}
	return sign(key, id, timestamp.Unix(), body), nil
}

// Errors of Verify.
var (
	ErrMissingHeaders = errors.New("webhook: missing webhook-id, webhook-timestamp or webhook-signature")
	ErrTimestamp      = errors.New("webhook: timestamp outside the tolerance")
	ErrSignature      = errors.New("webhook: no matching signature")
)

// Verify checks a received webhook, as a receiver should: the headers are present, the
// timestamp is within Tolerance of now, and one of the space-separated v1 signatures matches
// the body under secret (compared in constant time). body must be the raw bytes received.
func Verify(secret string, header http.Header, body []byte) error {
	return verifyAt(secret, header, body, time.Now())
}

func verifyAt(secret string, header http.Header, body []byte, now time.Time) error {
	id, tsText, sigs := header.Get(HeaderID), header.Get(HeaderTimestamp), header.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return ErrMissingHeaders
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not unix seconds", ErrTimestamp, tsText)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Tolerance || d < -Tolerance {
		return ErrTimestamp
	}
	key, err := secretKey(secret)
	if err != nil {
		return err
	}
	want := []byte(sign(key, id, ts, body))
	for s := range strings.FieldsSeq(sigs) {
		if hmac.Equal([]byte(s), want) {
			return nil
		}
	}
	return ErrSignature
}

// Body is the JSON a webhook receives for an event, following the specification's recommended
// shape, with the subject (the key of the order guarantee) beside the type.
func Body(typ, subject string, at time.Time, data json.RawMessage) ([]byte, error) {
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	return json.Marshal(struct {
		Type      string          `json:"type"`
		Timestamp string          `json:"timestamp"`
		Subject   string          `json:"subject,omitempty"`
		Data      json.RawMessage `json:"data"`
	}{typ, at.UTC().Format(time.RFC3339Nano), subject, data})
}

// DeliveryError is a failed delivery attempt.
type DeliveryError struct {
	// StatusCode is the endpoint's answer; 0 when it did not answer.
	StatusCode int
	// RetryAfter is the endpoint's Retry-After, if it sent one in seconds.
	RetryAfter time.Duration
	Err        error
}

func (e *DeliveryError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("endpoint answered %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	return e.Err.Error()
}

func (e *DeliveryError) Unwrap() error { return e.Err }

// Result is one delivery attempt.
type Result struct {
	// StatusCode is the endpoint's answer; 0 when it did not answer.
	StatusCode int
	// Latency runs from sending the request to the response's headers.
	Latency time.Duration
	// Err is nil for a 2xx answer, a *DeliveryError otherwise.
	Err error
}

// Post sends one signed message to target with client, within timeout.
func Post(ctx context.Context, client *http.Client, target, secret, id string, body []byte, timeout time.Duration) Result {
	key, err := secretKey(secret)
	if err != nil {
		return Result{Err: &DeliveryError{Err: err}}
	}
	return post(ctx, client, target, key, id, body, timeout)
}

// Post sends one message signed with k to target with client, within timeout.
func (k Key) Post(ctx context.Context, client *http.Client, target, id string, body []byte, timeout time.Duration) Result {
	return post(ctx, client, target, k, id, body, timeout)
}

func post(ctx context.Context, client *http.Client, target string, key []byte, id string, body []byte, timeout time.Duration) Result {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return Result{Err: &DeliveryError{Err: err}}
	}
	ts := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "better-compute-webhooks/1")
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, sign(key, id, ts, body))
	start := time.Now()
	res, err := client.Do(req)
	latency := time.Since(start)
	if err != nil {
		return Result{Latency: latency, Err: &DeliveryError{Err: redact(err)}}
	}
	// Read a little of the answer so the connection can be reused, and no more.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	_ = res.Body.Close()
	r := Result{StatusCode: res.StatusCode, Latency: latency}
	if !StatusOK(res.StatusCode) {
		de := &DeliveryError{StatusCode: res.StatusCode, Err: fmt.Errorf("status %d", res.StatusCode)}
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s > 0 {
			de.RetryAfter = time.Duration(s) * time.Second
		}
		r.Err = de
	}
	return r
}

// redact keeps a transport error's cause but not the URL it names (which may hold a token in
// its path or query): the *url.Error wrapper is dropped.
func redact(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}

// StatusOK reports a successful webhook answer: any 2xx.
func StatusOK(code int) bool { return code >= http.StatusOK && code < http.StatusMultipleChoices }

// EventID is the message id (webhook-id) of the outbox row id, "evt_<id>": the same on every
// attempt, and the id events/list gives the event.
func EventID(id int64) string { return "evt_" + strconv.FormatInt(id, 10) }

// SinkName is the outbox sink name of a webhook, "webhook:<id>": the key of its cursor.
func SinkName(id uuid.UUID) string { return "webhook:" + id.String() }

// A webhook's states (webhooks.state).
const (
	StateHealthy = "healthy"
	StateFailing = "failing"
)
