-- Sign-in flows remember the client address that started them (ratelimit.AddressKey: an IPv4
-- address or an IPv6 /64), so that one address can hold only a few unfinished flows
-- (auth.flows.perAddress) and anonymous starts cannot fill a method's cap (issue 31).
ALTER TABLE auth_flows ADD COLUMN client text NOT NULL DEFAULT '';

-- The unfinished flows a start counts: by method and by client, recent first.
CREATE INDEX auth_flows_open_by_method ON auth_flows (auth_method_id, created_at) WHERE used_at IS NULL;
CREATE INDEX auth_flows_open_by_client ON auth_flows (client, created_at) WHERE used_at IS NULL;
