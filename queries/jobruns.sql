-- When each background job last ran (internal/jobrun writes, doctor reads).

-- name: RecordJobRun :exec
INSERT INTO job_runs (name, last_run_at, last_error, last_ok_at)
VALUES (sqlc.arg(name), now(), sqlc.arg(last_error)::text, CASE WHEN sqlc.arg(last_error)::text = '' THEN now() END)
ON CONFLICT (name) DO UPDATE
SET last_run_at = excluded.last_run_at,
    last_error = excluded.last_error,
    last_ok_at = COALESCE(excluded.last_ok_at, job_runs.last_ok_at);

-- name: ListJobRuns :many
SELECT * FROM job_runs ORDER BY name;
