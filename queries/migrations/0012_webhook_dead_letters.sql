-- A failing webhook cannot hold the outbox: the sinks role retries a webhook's failed deliveries
-- on a bounded schedule (webhooks.retry), and when it runs out parks the webhook's undelivered
-- events in webhook_dead_letters, marks the webhook failing and moves its cursor past them. While
-- failing, its new events are parked as they come. webhooks/replayDeadLetters queues the parked
-- events for delivery again and marks the webhook healthy. Retention prunes the outbox by the
-- cursors of the other sinks only (see PruneOutbox).

-- healthy: delivered to (and retried on failure); failing: the retry schedule ran out at
-- failing_since because of failure, and events are parked instead of delivered.
ALTER TABLE webhooks
    ADD COLUMN state                text        NOT NULL DEFAULT 'healthy' CHECK (state IN ('healthy', 'failing')),
    ADD COLUMN failing_since        timestamptz,
    ADD COLUMN failure              text        NOT NULL DEFAULT '' CHECK (length(failure) <= 2000),
    -- Parked events dropped, oldest first, to keep the webhook within its dead-letter cap.
    ADD COLUMN dead_letters_dropped bigint      NOT NULL DEFAULT 0;

-- The first failed delivery of the sink's current run of failures (NULL when its last round had
-- none): the retry schedule counts from here, across restarts and lease hand-overs.
ALTER TABLE sink_cursors ADD COLUMN retry_since timestamptz;

-- A webhook's parked events: copies of outbox rows (the outbox prunes its own), at most the sinks
-- role's cap per webhook. Written by the holder of the webhook's dispatch lease, under its fencing
-- token; queued for delivery again by webhooks/replayDeadLetters.
CREATE TABLE webhook_dead_letters (
    webhook_id uuid        NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    tenant_id  uuid        NOT NULL,
    -- The event's outbox id: its webhook-id is "evt_<outbox_id>", the same as on every attempt.
    outbox_id  bigint      NOT NULL,
    type       text        NOT NULL,
    subject    text        NOT NULL,
    payload    jsonb       NOT NULL,
    -- When the event happened (the outbox row's created_at).
    created_at timestamptz NOT NULL,
    parked_at  timestamptz NOT NULL DEFAULT now(),
    -- Why it was parked: the webhook's failure.
    error      text        NOT NULL DEFAULT '' CHECK (length(error) <= 2000),
    -- Queued for delivery again (webhooks/replayDeadLetters); the row goes once delivered.
    replay     boolean     NOT NULL DEFAULT false,
    PRIMARY KEY (webhook_id, outbox_id)
);
-- The dispatcher's look for queued events, every round: an empty partial index while none are.
CREATE INDEX webhook_dead_letters_replay ON webhook_dead_letters (webhook_id, outbox_id) WHERE replay;
