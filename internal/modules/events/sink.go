package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/internal/webhook"
)

// SinkName is the module's sink: its cursor in sink_cursors, its lease, its events_nats_status
// row.
const SinkName = Name + ":nats"

// The headers of every message, besides Nats-Msg-Id (the event's id, "evt_<id>").
const (
	HeaderType    = "Bc-Event-Type"
	HeaderSubject = "Bc-Event-Subject"
	HeaderTenant  = "Bc-Tenant-Id"
	// HeaderTime is when the event was written (its created_at), RFC 3339 in UTC.
	HeaderTime = "Bc-Event-Time"
)

// errClosed is Deliver's error after Close.
var errClosed = errors.New("the NATS sink is closed")

// Sink publishes every tenant's events to the module's JetStream stream. It connects on its
// first delivery and then stays connected, reconnecting without end; while it is not connected a
// delivery fails at once and the dispatcher retries it. Before its first publish it creates the
// stream or checks the one there, and again after a publish that no stream answered. Deliveries are safe to make
// concurrently; the dispatcher makes one subject's one at a time, so each waits for its
// acknowledgement before the next of that subject.
type Sink struct {
	cfg    Config
	log    *slog.Logger
	in     *instruments
	status *statusRecorder

	mu       sync.Mutex
	nc       *nats.Conn
	js       jetstream.JetStream
	streamOK bool
	closed   bool
}

var _ sinks.Sink = (*Sink)(nil)

// newSink returns the sink of cfg (validated), recording its status in pool's
// events_nats_status and counting in in.
func newSink(cfg Config, pool *pgxpool.Pool, log *slog.Logger, in *instruments) *Sink {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("sink", SinkName)
	return &Sink{cfg: cfg, log: log, in: in, status: newStatusRecorder(pool, SinkName, cfg.Stream, log)}
}

// Name is SinkName.
func (s *Sink) Name() string { return SinkName }

// Source is every event of every tenant.
func (s *Sink) Source() sinks.Source { return sinks.Source{} }

// Subject is the NATS subject of a tenant's event of a type: "<prefix>.<tenant id>.<type>".
func (c *Config) Subject(tenant uuid.UUID, eventType string) string {
	return c.SubjectPrefix + "." + tenant.String() + "." + eventType
}

// Deliver publishes the event and waits, at most PublishTimeout, for the stream to acknowledge
// it. A publish the stream drops as a duplicate (the same event published again within the
// duplicate window) is a delivery.
func (s *Sink) Deliver(ctx context.Context, e sinks.Event) error {
	err := s.publish(ctx, e)
	if err != nil && ctx.Err() == nil {
		s.in.failures.Inc()
		s.status.failed(err)
	}
	return err
}

func (s *Sink) publish(ctx context.Context, e sinks.Event) error {
	if !validSubject(e.Type) {
		return fmt.Errorf("event type %q is not NATS subject tokens", e.Type)
	}
	body, err := webhook.Body(e.Type, e.Subject, e.CreatedAt, e.Payload)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	js, err := s.ready(ctx)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: s.cfg.Subject(e.TenantID, e.Type), Data: body, Header: nats.Header{}}
	msg.Header.Set(HeaderType, e.Type)
	msg.Header.Set(HeaderSubject, e.Subject)
	msg.Header.Set(HeaderTenant, e.TenantID.String())
	msg.Header.Set(HeaderTime, e.CreatedAt.UTC().Format(time.RFC3339Nano))
	pctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
	defer cancel()
	start := time.Now()
	ack, err := js.PublishMsg(pctx, msg, jetstream.WithMsgID(e.MessageID()), jetstream.WithExpectStream(s.cfg.Stream))
	if err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			s.recheck() // the stream may be gone: a server that came back without its store
		}
		return fmt.Errorf("publish to stream %s: %w", s.cfg.Stream, err)
	}
	s.in.latency.Set(time.Since(start).Seconds())
	if ack.Duplicate {
		s.in.duplicates.Inc()
	} else {
		s.in.published.Inc()
	}
	s.status.published(e.ID, ack.Sequence, ack.Duplicate)
	return nil
}

// ready returns the JetStream client once connected and the stream is checked.
func (s *Sink) ready(ctx context.Context) (jetstream.JetStream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if s.nc == nil {
		opts, err := s.cfg.options(s.log, true)
		if err != nil {
			return nil, err
		}
		// With RetryOnFailedConnect a server that is down is no error: the connection keeps trying.
		nc, err := nats.Connect(s.cfg.urlList(), opts...)
		if err != nil {
			return nil, fmt.Errorf("connect to NATS (%s): %w", strings.Join(s.cfg.Servers(), ","), err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("nats jetstream: %w", err)
		}
		s.nc, s.js = nc, js
		s.log.Info("connecting to NATS", "config", s.cfg)
	}
	if !s.nc.IsConnected() {
		return nil, fmt.Errorf("not connected to NATS (%s, %s); retrying", strings.Join(s.cfg.Servers(), ","), strings.ToLower(s.nc.Status().String()))
	}
	if !s.streamOK {
		sctx, cancel := context.WithTimeout(ctx, s.cfg.PublishTimeout)
		defer cancel()
		if err := ensureStream(sctx, s.js, &s.cfg, s.log); err != nil {
			return nil, err
		}
		s.streamOK = true
	}
	return s.js, nil
}

// recheck makes the next delivery check the stream again.
func (s *Sink) recheck() {
	s.mu.Lock()
	s.streamOK = false
	s.mu.Unlock()
}

// Close closes the connection and writes the pending status; deliveries fail afterwards. A
// process that stops need not call it (what it would write only reports).
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	nc := s.nc
	s.mu.Unlock()
	if nc != nil {
		nc.Close()
	}
	return s.status.close(ctx)
}
