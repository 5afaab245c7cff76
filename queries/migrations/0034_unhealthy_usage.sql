-- GPU-time held on an unhealthy GPU (issue 33), marked in usage so that it can be credited.
--
-- Each GPU allocation keeps the last span during which its GPU was unhealthy while held:
-- internal/gpustate sets unhealthy_since when the held GPU becomes unhealthy and unhealthy_until
-- when it becomes healthy or degraded again (NULL while it is still unhealthy). Metering
-- (queries/capacity.sql: EndAllocations, MeterHeldAllocations) counts, for each usage record, the
-- seconds of the record's period inside that span (allocation_unhealthy_seconds), so a span that
-- opened and closed between two meterings is counted all the same.
--
-- The count is exact for one unhealthy span per metering interval (an hour of a running lease, or
-- the rest of the hour when the lease ends). A GPU that becomes unhealthy again before its last
-- span was metered to its end continues that span (gpustate keeps unhealthy_since): the healthy
-- time between the two spans is counted as unhealthy too, so a flapping GPU is credited from its
-- first failure in the interval, never less than it was unhealthy.
ALTER TABLE allocations
    ADD COLUMN unhealthy_since timestamptz,
    ADD COLUMN unhealthy_until timestamptz,
    ADD CONSTRAINT allocations_unhealthy_span
        CHECK (unhealthy_until IS NULL OR (unhealthy_since IS NOT NULL AND unhealthy_until >= unhealthy_since));

-- Of a record's usage, the GPU-seconds held on an unhealthy GPU (0 for cpu and memory); of an
-- hour's amount, the sum of those.
ALTER TABLE usage_records ADD COLUMN unhealthy_amount numeric NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN unhealthy_amount numeric NOT NULL DEFAULT 0;

-- The seconds of [period_start, period_end) inside the unhealthy span [since, until) (until NULL:
-- still open); 0 without a span. Exact (numeric), as usage amounts are.
CREATE FUNCTION allocation_unhealthy_seconds(period_start timestamptz, period_end timestamptz, since timestamptz, until timestamptz)
RETURNS numeric LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN since IS NULL THEN 0::numeric
                ELSE GREATEST(EXTRACT(EPOCH FROM LEAST(period_end, COALESCE(until, 'infinity'::timestamptz)) - GREATEST(period_start, since)), 0)
           END
$$;
