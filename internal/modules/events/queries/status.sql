-- name: GetNatsStatus :one
-- The delivery status of one of the events module's NATS sinks (events_nats_status).
SELECT sink, stream, last_event_id, last_stream_seq, published, last_error, updated_at
FROM events_nats_status
WHERE sink = sqlc.arg(sink);

-- name: RecordNatsStatus :exec
-- Records a batch: published_in_batch messages went out, the last of them event last_event_id at
-- stream sequence last_stream_seq, and last_error is the batch's error (empty when it succeeded;
-- cut to the column's 1024 characters). The ids move only when the batch published something, so
-- a failed batch keeps the position of the last good one.
INSERT INTO events_nats_status AS s (sink, stream, last_event_id, last_stream_seq, published, last_error)
VALUES (sqlc.arg(sink), sqlc.arg(stream), sqlc.arg(last_event_id), sqlc.arg(last_stream_seq),
        sqlc.arg(published_in_batch)::bigint, left(sqlc.arg(last_error)::text, 1024))
ON CONFLICT (sink) DO UPDATE SET
    stream          = EXCLUDED.stream,
    last_event_id   = CASE WHEN EXCLUDED.published > 0 THEN EXCLUDED.last_event_id ELSE s.last_event_id END,
    last_stream_seq = CASE WHEN EXCLUDED.published > 0 THEN EXCLUDED.last_stream_seq ELSE s.last_stream_seq END,
    published       = s.published + EXCLUDED.published,
    last_error      = EXCLUDED.last_error,
    updated_at      = now();

-- name: ClearNatsError :exec
-- Forgets the sink's last error, once the sink is known to deliver again.
UPDATE events_nats_status
SET last_error = '', updated_at = now()
WHERE sink = sqlc.arg(sink);
