-- A lease whose capacity the placer took back is preempted. The value is added in a migration of
-- its own: PostgreSQL does not let the transaction that adds an enum value use it.
ALTER TYPE lease_state ADD VALUE 'preempted' AFTER 'failed';
