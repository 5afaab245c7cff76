-- The database says what states exist: node, command, lease and reservation states become enum
-- types (sqlc turns each into a Go type with a constant per value, in gen/db), in place of text
-- columns with CHECK lists. And the workers' single-writer leases become locks, so that "lease"
-- means only what a tenant leases (pool_leases).
--
-- Changing a column's type re-reads the expressions that mention it, which compare with text
-- ('ready'::text) and would no longer type-check, so every CHECK, index and exclusion constraint
-- on a state column is dropped first and made again after; the CHECK lists of values are not made
-- again, the type is the list now. Enum values compare in the order declared here, a lifecycle's
-- order.

-- joining -> ready -> cordoned -> draining -> drained -> retired (cordoned -> ready by uncordon).
CREATE TYPE node_state AS ENUM ('joining', 'ready', 'cordoned', 'draining', 'drained', 'retired');
-- pending -> sent -> acked -> succeeded | failed; expired and cancelled end it from any state
-- before; sent -> pending when an ack does not come in time.
CREATE TYPE command_state AS ENUM ('pending', 'sent', 'acked', 'succeeded', 'failed', 'expired', 'cancelled');
-- A pool lease: pending -> placed <-> at_risk; released, expired or failed end it.
CREATE TYPE lease_state AS ENUM ('pending', 'placed', 'at_risk', 'released', 'expired', 'failed');
CREATE TYPE reservation_state AS ENUM ('active', 'cancelled');

-- Nodes.
DROP INDEX nodes_schedulable;
ALTER TABLE nodes DROP CONSTRAINT nodes_state;
ALTER TABLE nodes ALTER COLUMN state DROP DEFAULT;
ALTER TABLE nodes ALTER COLUMN state TYPE node_state USING state::text::node_state;
ALTER TABLE nodes ALTER COLUMN state SET DEFAULT 'joining';
-- A node is schedulable when it is ready, online and not revoked.
CREATE INDEX nodes_schedulable ON nodes (tenant_id, pool) WHERE state = 'ready' AND online AND revoked_at IS NULL;

-- Commands.
DROP INDEX commands_pending;
DROP INDEX commands_sent;
ALTER TABLE commands DROP CONSTRAINT commands_state_check;
ALTER TABLE commands DROP CONSTRAINT commands_check;
ALTER TABLE commands ALTER COLUMN state DROP DEFAULT;
ALTER TABLE commands ALTER COLUMN state TYPE command_state USING state::text::command_state;
ALTER TABLE commands ALTER COLUMN state SET DEFAULT 'pending';
-- Set exactly when the command reaches a final state.
ALTER TABLE commands ADD CONSTRAINT commands_check
    CHECK ((finished_at IS NOT NULL) = (state IN ('succeeded', 'failed', 'expired', 'cancelled')));
CREATE INDEX commands_pending ON commands (node_id, id) WHERE state = 'pending';
CREATE INDEX commands_sent ON commands (sent_at) WHERE state = 'sent';

-- Pool leases.
DROP INDEX pool_leases_pending;
DROP INDEX pool_leases_running;
DROP INDEX pool_leases_active;
ALTER TABLE pool_leases DROP CONSTRAINT pool_leases_state_check;
ALTER TABLE pool_leases DROP CONSTRAINT pool_leases_check1;
ALTER TABLE pool_leases ALTER COLUMN state DROP DEFAULT;
ALTER TABLE pool_leases ALTER COLUMN state TYPE lease_state USING state::text::lease_state;
ALTER TABLE pool_leases ALTER COLUMN state SET DEFAULT 'pending';
ALTER TABLE pool_leases ADD CONSTRAINT pool_leases_check1
    CHECK ((state IN ('placed', 'at_risk')) = (placed_at IS NOT NULL AND ends_at IS NOT NULL AND ended_at IS NULL)
           OR state IN ('released', 'expired', 'failed'));
CREATE INDEX pool_leases_pending ON pool_leases (pool_id, seq) WHERE state = 'pending';
CREATE INDEX pool_leases_running ON pool_leases (pool_id, ends_at) WHERE state IN ('placed', 'at_risk');
CREATE INDEX pool_leases_active ON pool_leases (tenant_id, pool_id) WHERE state IN ('pending', 'placed', 'at_risk');

-- Reservations.
ALTER TABLE reservations DROP CONSTRAINT reservations_no_overlap;
ALTER TABLE reservations DROP CONSTRAINT reservations_state_check;
ALTER TABLE reservations ALTER COLUMN state DROP DEFAULT;
ALTER TABLE reservations ALTER COLUMN state TYPE reservation_state USING state::text::reservation_state;
ALTER TABLE reservations ALTER COLUMN state SET DEFAULT 'active';
-- A pool is reserved at most once at any moment: double booking fails here.
ALTER TABLE reservations ADD CONSTRAINT reservations_no_overlap
    EXCLUDE USING gist (pool_id WITH =, during WITH &&) WHERE (state = 'active');

-- The workers' single-writer locks (internal/workers/locks), formerly leases.
ALTER TABLE leases RENAME TO locks;
ALTER INDEX leases_pkey RENAME TO locks_pkey;
