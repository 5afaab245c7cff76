-- Gangs (issue 34): leases of several nodes placed all at once, in one domain of the pool's
-- topology.

-- topology_levels: node label keys, outermost first ("block", "rack"); a gang's members share a
-- domain at one level. gang_reservation_wait_ms: how long a gang waits before the placer
-- reserves a domain for it (backfill).
ALTER TABLE pools
    ADD COLUMN topology_levels          text[] NOT NULL DEFAULT '{}' CHECK (cardinality(topology_levels) <= 8),
    ADD COLUMN gang_reservation_wait_ms bigint NOT NULL DEFAULT 300000
        CHECK (gang_reservation_wait_ms BETWEEN 0 AND 86400000);

-- nodes and gpus_per_node: 0 and 0 outside a gang; gpus is their product in one. gang_level: the
-- topology level its members must (gang_level_required) or should share, '' for none.
-- gang_domain: the domain a placed gang got ("block=b1,rack=r07"). on_unhealthy_member: '' (the
-- pool's gpu_health_policy decides), 'keep' or 'end'. reserved_start: while the gang waits, when
-- the placer expects it to start on the domain it reserved for it.
ALTER TABLE pool_leases
    ADD COLUMN nodes               integer     NOT NULL DEFAULT 0 CHECK (nodes = 0 OR nodes BETWEEN 2 AND 1024),
    ADD COLUMN gpus_per_node       integer     NOT NULL DEFAULT 0 CHECK (gpus_per_node >= 0),
    ADD COLUMN gang_level          text        NOT NULL DEFAULT '',
    ADD COLUMN gang_level_required boolean     NOT NULL DEFAULT false,
    ADD COLUMN gang_domain         text        NOT NULL DEFAULT '',
    ADD COLUMN on_unhealthy_member text        NOT NULL DEFAULT '' CHECK (on_unhealthy_member IN ('', 'keep', 'end')),
    ADD COLUMN reserved_start      timestamptz,
    ADD CONSTRAINT pool_leases_gang_shape
        CHECK ((nodes = 0 AND gpus_per_node = 0 AND gang_level = '') OR (gpus_per_node > 0 AND gpus = nodes * gpus_per_node));

-- A gang member's rank (every allocation on one node has the same); NULL outside a gang.
ALTER TABLE allocations
    ADD COLUMN rank integer CHECK (rank >= 0);
