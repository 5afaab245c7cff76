-- Admission of leases against the usage counters (migration 0023_lease_usage), whose added rows
-- the lease's own insert has just bumped and locked.

-- name: LeaseAdmissionUsage :one
-- What the tenant's pending and running leases in the pool hold and its pending leases in every
-- pool, the new lease included, with the tenant's quota in the pool (null limits: none).
SELECT u.leases, u.gpus, u.cpus, u.memory_bytes,
       (SELECT COALESCE(sum(t.pending), 0)::bigint FROM tenant_lease_usage t WHERE t.tenant_id = sqlc.arg(tenant_id)) AS pending,
       q.max_leases, q.max_gpus, q.max_cpus, q.max_memory_bytes
FROM (SELECT COALESCE(sum(p.leases), 0)::bigint AS leases, COALESCE(sum(p.gpus), 0)::bigint AS gpus,
             COALESCE(sum(p.cpus), 0)::bigint AS cpus, COALESCE(sum(p.memory_bytes), 0)::bigint AS memory_bytes
      FROM pool_lease_usage p
      WHERE p.tenant_id = sqlc.arg(tenant_id) AND p.pool_id = sqlc.arg(pool_id)) u
LEFT JOIN pool_quotas q ON q.tenant_id = sqlc.arg(tenant_id) AND q.pool_id = sqlc.arg(pool_id);
