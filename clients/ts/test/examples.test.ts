// The README's "Sharing a pool with another tenant" example (examples/grants.ts), run against
// canned answers: no server is needed, the calls never leave the client.
import { create, type Message } from "@bufbuild/protobuf";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";

import * as grants from "../examples/grants.js";
import {
  type BetterCompute,
  createClient,
  type Interceptor,
  leasesv1,
  poolsv1,
  timestampMs,
  usagev1,
} from "../src/index.js";

interface Call {
  method: string;
  message: Message;
}

/**
 * A client whose calls are recorded in calls and answered from answers, by method (an empty
 * response for a method without one), instead of being sent.
 */
function cannedClient(answers: Record<string, Message>): { bc: BetterCompute; calls: Call[] } {
  const calls: Call[] = [];
  const canned: Interceptor = () => async (req) => {
    if (req.stream) throw new Error(`${req.method.name} streams`);
    calls.push({ method: req.method.localName, message: req.message });
    const message = answers[req.method.localName] ?? create(req.method.output);
    return { stream: false, service: req.service, method: req.method, header: new Headers(), trailer: new Headers(), message };
  };
  const bc = createClient({ baseUrl: "http://canned.invalid/api", apiKey: "bck_canned", interceptors: [canned] });
  return { bc, calls };
}

const h100 = "NVIDIA H100 80GB HBM3";

function logged(): string[] {
  return vi.mocked(console.log).mock.calls.map((args) => args.map(String).join(" "));
}

describe("the sharing example", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("is what the README shows", async () => {
    const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
    const example = await readFile(new URL("../examples/grants.ts", import.meta.url), "utf8");
    const section = readme.split("\n## Sharing a pool with another tenant\n")[1] ?? "";
    const blocks = [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    expect(blocks).toHaveLength(4);
    for (const b of blocks) {
      const indented = b.replace(/^(?=.)/gm, "  ");
      expect(example, "README.md shows code that is not in examples/grants.ts").toContain(indented);
    }
  });

  it("grants a pool", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    const { bc, calls } = cannedClient({
      grant: create(poolsv1.GrantResponseSchema, { grant: { id: "grant-1" } }),
    });
    await grants.grantPool(bc, "pool-1", "tenant-2");
    expect(calls).toMatchObject([
      {
        method: "grant",
        message: {
          poolId: "pool-1",
          tenantId: "tenant-2",
          nominal: { gpus: { [h100]: 4 } },
          borrowingLimit: { gpus: { [h100]: 4 } },
          weight: 1,
        },
      },
    ]);
    expect(logged()).toEqual(["granted grant-1"]);
  });

  it("leases from a granted pool as the grantee", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    const { bc: grantee, calls } = cannedClient({
      list: create(poolsv1.ListResponseSchema, {
        pools: [
          { id: "own", name: "own" },
          { id: "pool-1", name: "shared", granted: true, grant: { nominal: { gpus: { [h100]: 4 } } } },
        ],
      }),
      create: create(leasesv1.CreateResponseSchema, { lease: { id: "lease-1", state: leasesv1.LeaseState.PENDING } }),
      get: create(leasesv1.GetResponseSchema, {
        lease: {
          id: "lease-1",
          state: leasesv1.LeaseState.PLACED,
          borrowing: true,
          allocations: [{ nodeId: "node-1", hostname: "gpu-1", gpuIndex: 3, gpuUuid: "GPU-abc" }],
        },
      }),
    });
    await grants.leaseFromGrantedPool(grantee, "pool-1");
    expect(calls.map((c) => c.method)).toEqual(["list", "create", "get"]);
    expect(calls[1].message).toMatchObject({ poolId: "pool-1", gpus: 2, gpuModel: h100, priority: 100 });
    expect(calls[2].message).toMatchObject({ id: "lease-1" });
    const out = logged();
    expect(out).toHaveLength(3);
    expect(out[0]).toMatch(/^pool-1 shared nominal /);
    expect(out.slice(1)).toEqual([
      "node-1 gpu-1 GPU 3 GPU-abc",
      "beyond the nominal quota: preempted first when the capacity is needed back",
    ]);
  });

  it("fails when the lease is not placed", async () => {
    const { bc: grantee } = cannedClient({
      create: create(leasesv1.CreateResponseSchema, {
        lease: { id: "lease-1", state: leasesv1.LeaseState.FAILED, reason: "the grant was revoked" },
      }),
    });
    await expect(grants.leaseFromGrantedPool(grantee, "pool-1")).rejects.toThrow(
      "lease FAILED: the grant was revoked",
    );
  });

  it("lists and revokes grants", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    const { bc, calls } = cannedClient({
      listGrants: create(poolsv1.ListGrantsResponseSchema, { grants: [{ tenantId: "tenant-2" }] }),
    });
    await grants.listAndRevokeGrants(bc, "pool-1", "tenant-2");
    expect(calls).toMatchObject([
      { method: "listGrants", message: { poolId: "pool-1" } },
      { method: "revokeGrant", message: { poolId: "pool-1", tenantId: "tenant-2" } },
    ]);
    expect(logged()).toHaveLength(1);
  });

  it("reads and exports usage by tenant", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    const csv = "period_start,period_end,tenant_id,pool_id,pool_name,resource,model,quantity,unit,unhealthy_quantity,active_quantity,mean_utilization\n";
    const { bc, calls } = cannedClient({
      query: create(usagev1.QueryResponseSchema, {
        totals: [{ tenantId: "tenant-2", poolId: "pool-1", resource: "gpu", model: h100, amount: 7200 }],
      }),
      export: create(usagev1.ExportResponseSchema, { data: new TextEncoder().encode(csv), rows: 0n }),
    });
    const dir = await mkdtemp(join(tmpdir(), "bc-examples-"));
    try {
      await grants.usageByTenant(bc, join(dir, "usage.csv"));
      expect(await readFile(join(dir, "usage.csv"), "utf8")).toBe(csv);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(calls.map((c) => c.method)).toEqual(["query", "export"]);
    const [query, exp] = calls.map((c) => c.message) as [usagev1.QueryRequest, usagev1.ExportRequest];
    expect(query.scope).toBe(usagev1.Scope.OWNED_POOLS);
    expect(exp.scope).toBe(usagev1.Scope.OWNED_POOLS);
    expect(exp.format).toBe(usagev1.ExportFormat.CSV);
    const end = timestampMs(query.endTime!);
    expect(end % 3_600_000).toBe(0);
    expect(end - timestampMs(query.startTime!)).toBe(30 * 86_400_000);
    expect(timestampMs(exp.startTime!)).toBe(timestampMs(query.startTime!));
    expect(timestampMs(exp.endTime!)).toBe(end);
    expect(logged()).toEqual([`tenant-2 pool-1 gpu ${h100} 7200`]);
  });
});
