-- The worker runtime: leases (single-writer work with fencing tokens), shard membership, and the
-- reconcile queue.

CREATE TABLE leases (
    name          text        PRIMARY KEY,
    holder        text        NOT NULL,
    -- Increases every time the lease changes hands (or is taken again after expiring), never
    -- otherwise; a write guarded by a token is refused once a newer token exists.
    fencing_token bigint      NOT NULL,
    expires_at    timestamptz NOT NULL,
    acquired_at   timestamptz NOT NULL DEFAULT now(),
    renewed_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE shard_members (
    role         text        NOT NULL,
    member       text        NOT NULL,
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (role, member)
);

CREATE TABLE reconcile_queue (
    kind        text        NOT NULL,
    key         text        NOT NULL,
    -- Keys are spread over 256 shards by a stable hash; a worker dequeues only its shards.
    shard       integer     NOT NULL GENERATED ALWAYS AS (hashtext(key) & 255) STORED,
    due_at      timestamptz NOT NULL DEFAULT now(),
    -- Bumped by every enqueue, so a key enqueued again while it is being reconciled is kept.
    generation  bigint      NOT NULL DEFAULT 1,
    attempts    integer     NOT NULL DEFAULT 0,
    last_error  text,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, key)
);
CREATE INDEX reconcile_queue_due ON reconcile_queue (kind, shard, due_at);
