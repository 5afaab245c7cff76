-- Command payloads become typed (bettercompute.daemon.v1 ExecPayload, EchoPayload, ...), stored
-- as the protojson of the payload message of the command's type. Upgrade, configure, drain,
-- undrain, reboot and collectInventory payloads already have that shape; an exec's argv becomes
-- path and args, and an echo's payload becomes its data.
UPDATE commands
SET payload = (payload - 'argv')
    || jsonb_build_object('path', payload->'argv'->0)
    || CASE WHEN jsonb_array_length(payload->'argv') > 1
            THEN jsonb_build_object('args', (SELECT jsonb_agg(a.e ORDER BY a.i)
                                             FROM jsonb_array_elements(payload->'argv') WITH ORDINALITY AS a(e, i)
                                             WHERE a.i > 1))
            ELSE '{}'::jsonb END
WHERE type = 'exec' AND jsonb_typeof(payload->'argv') = 'array' AND jsonb_array_length(payload->'argv') > 0;

UPDATE commands
SET payload = jsonb_build_object('data', payload)
WHERE type = 'echo' AND payload <> '{}'::jsonb;
