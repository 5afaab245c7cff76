// The "Sharing a pool with another tenant" example of README.md. `npm run typecheck` compiles it;
// test/examples.test.ts runs it against canned answers and checks that the README shows each
// function's body as it is here.
import { writeFile } from "node:fs/promises";

import { type BetterCompute, durationFromMs, leasesv1, timestampFromDate, usagev1 } from "../src/index.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The owner (bc) grants its pool poolId to tenant tenantId. */
export async function grantPool(bc: BetterCompute, poolId: string, tenantId: string): Promise<void> {
  const { grant } = await bc.pools.grant({
    poolId,
    tenantId,
    nominal: { gpus: { "NVIDIA H100 80GB HBM3": 4 } },
    borrowingLimit: { gpus: { "NVIDIA H100 80GB HBM3": 4 } },
    weight: 1,
  });
  console.log("granted", grant!.id);
}

/** The grantee, with its own API key, lists its pools and leases from the granted pool poolId. */
export async function leaseFromGrantedPool(grantee: BetterCompute, poolId: string): Promise<void> {
  const { pools } = await grantee.pools.list({});
  for (const p of pools.filter((p) => p.granted)) {
    console.log(p.id, p.name, "nominal", p.grant?.nominal?.gpus, "borrowable", p.grant?.borrowable?.gpus);
  }
  let { lease } = await grantee.leases.create({
    poolId, gpus: 2, gpuModel: "NVIDIA H100 80GB HBM3", priority: 100, duration: durationFromMs(3_600_000),
  });
  while (lease!.state === leasesv1.LeaseState.PENDING) {
    await sleep(1000);
    ({ lease } = await grantee.leases.get({ id: lease!.id }));
  }
  if (lease!.state !== leasesv1.LeaseState.PLACED) throw new Error(`lease ${leasesv1.LeaseState[lease!.state]}: ${lease!.reason}`);
  for (const a of lease!.allocations) console.log(a.nodeId, a.hostname, "GPU", a.gpuIndex, a.gpuUuid);
  if (lease!.borrowing) console.log("beyond the nominal quota: preempted first when the capacity is needed back");
}

/** The owner lists the grants of its pool poolId and revokes tenant tenantId's. */
export async function listAndRevokeGrants(bc: BetterCompute, poolId: string, tenantId: string): Promise<void> {
  const { grants } = await bc.pools.listGrants({ poolId });
  for (const g of grants) console.log(g.tenantId, "uses", g.used?.gpus, "borrows", g.borrowed?.gpus);
  await bc.pools.revokeGrant({ poolId, tenantId });
}

/** The owner reads the last 30 days' usage of its pools by tenant and writes it as CSV to csvPath. */
export async function usageByTenant(bc: BetterCompute, csvPath: string): Promise<void> {
  const end = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
  const period = { startTime: timestampFromDate(new Date(end.getTime() - 30 * 86_400_000)), endTime: timestampFromDate(end) };
  const { totals } = await bc.usage.query({ ...period, scope: usagev1.Scope.OWNED_POOLS });
  for (const u of totals) console.log(u.tenantId, u.poolId, u.resource, u.model, u.amount); // GPU-, CPU- or MiB-seconds
  const { data } = await bc.usage.export({ ...period, scope: usagev1.Scope.OWNED_POOLS, format: usagev1.ExportFormat.CSV });
  await writeFile(csvPath, data);
}
