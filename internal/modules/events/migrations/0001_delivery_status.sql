-- Delivery status of the events module's NATS JetStream sinks: per sink, how far it has published
-- (the control plane's event id and the stream's sequence of the last message), how many messages
-- in all, and the last error, for status pages and doctor. Where the sink is in the outbox is its
-- sink_cursors row (the core's); this table only reports what reached NATS.

CREATE TABLE events_nats_status (
    sink            text        PRIMARY KEY,
    stream          text        NOT NULL,
    last_event_id   bigint      NOT NULL DEFAULT 0,
    last_stream_seq bigint      NOT NULL DEFAULT 0,
    published       bigint      NOT NULL DEFAULT 0,
    last_error      text        NOT NULL DEFAULT '' CHECK (length(last_error) <= 1024),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
