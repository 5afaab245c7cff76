// Drives a pool's Scaling panel in headless Chromium against the `better-compute dev --sim 3
// --sim-provider-delay 1s` server scripts/test starts (the provision module with the sim provider
// and the root tenant's machine class "sim"): a pool that does not autoscale says so, then, with
// scaling set and a lease no node of the pool can hold, the panel shows the autoscaler's scale-up
// decision and the machine it asked for. Against the second server (BETTER_COMPUTE_FLEET_URL,
// without the module) a pool's page shows no panel and no error. It uses the same variables as
// dashboard.test.mjs, and skips when the server has no provision module.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const apiUrl = (process.env.BETTER_COMPUTE_URL ?? "").replace(/\/+$/, "");
const apiKey = process.env.BETTER_COMPUTE_API_KEY ?? "";
const fleetUrl = (process.env.BETTER_COMPUTE_FLEET_URL ?? "").replace(/\/+$/, "");
const fleetKey = process.env.BETTER_COMPUTE_FLEET_API_KEY ?? "";
if (!apiUrl || !apiKey) {
  throw new Error("BETTER_COMPUTE_URL and BETTER_COMPUTE_API_KEY must be set; scripts/test sets them");
}
const output = process.env.BETTER_COMPUTE_TEST_OUTPUT || fileURLToPath(new URL("../test-results/", import.meta.url));
mkdirSync(output, { recursive: true });

/** Calls a JSON route {group}/{method}; answers the status and the body. */
async function post(url, key, route, body) {
  const res = await fetch(`${url}/${route}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Better-Compute": "1", Authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  let out;
  try {
    out = JSON.parse(text);
  } catch {
    out = { text };
  }
  return { status: res.status, body: out };
}

/** Calls a route of the provision server with its admin key, which must answer 200. */
async function call(route, body) {
  const { status, body: out } = await post(apiUrl, apiKey, route, body);
  assert.equal(status, 200, `${route}: ${JSON.stringify(out)}`);
  return out;
}

let context;
let userDataDir;
/** Whether the server serves the provision module (poolScaling/list answers). */
let provision = false;

before(async () => {
  provision = (await post(apiUrl, apiKey, "poolScaling/list", {})).status === 200;
  userDataDir = mkdtempSync(join(tmpdir(), "bc-chromium-"));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.BETTER_COMPUTE_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    viewport: { width: 1440, height: 900 },
  });
});

after(async () => {
  await context?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
});

async function signedIn(url, key) {
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  await page.goto(`${new URL(url).origin}/dashboard/`);
  await page.waitForSelector("#api-key");
  await page.fill("#api-key", key);
  await page.click("#sign-in");
  await page.waitForFunction(() => document.getElementById("view")?.dataset.loaded === "nodes", null, { timeout: 30_000 });
  return page;
}

/** Opens #/pools, then the pool's page from its card, and waits for it to render. */
async function openPool(page, pool) {
  await page.click('a[data-page="pools"]');
  await page.waitForFunction(() => document.getElementById("view")?.dataset.loaded === "pools", null, { timeout: 30_000 });
  await page.click(`[data-pool-id="${pool.id}"] a.pool-link`);
  await page.waitForSelector(`h1[data-pool-page="${pool.id}"]`, { timeout: 30_000 });
  await page.waitForFunction(() => document.getElementById("view")?.dataset.loaded === "pools", null, { timeout: 30_000 });
}

test("a pool's Scaling panel: not autoscaled, then the scale-up decision for a lease", { timeout: 180_000 }, async (t) => {
  if (!provision) {
    t.skip("the server has no provision module (scripts/test starts it with --sim-provider-delay)");
    return;
  }
  const suffix = Date.now().toString(36);
  // No node carries the label: every lease of the pool needs a new machine.
  const pool = (await call("pools/create", { name: `scaling-${suffix}`, nodeSelector: { "scaling-e2e": suffix } })).pool;
  const page = await signedIn(apiUrl, apiKey);
  let lease;
  try {
    await openPool(page, pool);
    assert.match(await page.innerText("#scaling"), /Not autoscaled\./);
    assert.match(await page.innerText("#flash"), /^\s*$/, "no error banner");

    await call("poolScaling/set", { poolId: pool.id, class: "sim", min: 0, max: 2, scaleUpDelayMs: 0, scaleDownIdleMs: 600_000 });
    lease = (await call("leases/create", { poolId: pool.id, cpus: 2, duration: "3600s" })).lease;
    await page.reload();
    await page.waitForSelector("#scaling dl.scaling-settings", { timeout: 30_000 });
    const settings = await page.innerText("#scaling dl.scaling-settings");
    assert.match(settings, /Machine class\s+sim/);
    assert.match(settings, /Min machines\s+0/);
    assert.match(settings, /Max machines\s+2/);
    assert.match(settings, /Scale-up delay\s+0 s/);
    assert.match(settings, /Scale-down idle time\s+10 min/);

    // The page renders again every few seconds while the pool autoscales.
    await page.waitForSelector('#scaling-decisions tr[data-decision-action="scale_up"]', { timeout: 60_000 });
    const row = page.locator('#scaling-decisions tr[data-decision-action="scale_up"]').first();
    assert.match(await row.locator("td.action").innerText(), /scale up/);
    assert.equal(await row.locator("td.count").innerText(), "1");
    assert.match(await row.locator("td.reason").innerText(), /pending lease/);
    assert.match(await row.locator("time").innerText(), /ago|in /);
    await page.waitForSelector("#scaling tr[data-machine-id]", { timeout: 30_000 });
    assert.match(await page.innerText("#scaling [data-setting=machines]"), /^1 \(\d [a-z]+\)$/);
    assert.match(await page.innerText("#flash"), /^\s*$/, "no error banner");
    await page.screenshot({ path: join(output, "dashboard-pool-scaling.png"), fullPage: true });
  } finally {
    await page.close();
    // Leave the server as it was for whatever runs next: no scaling, no lease, no machine.
    if (lease) await post(apiUrl, apiKey, "leases/release", { id: lease.id });
    const scaled = await post(apiUrl, apiKey, "poolScaling/get", { poolId: pool.id });
    await post(apiUrl, apiKey, "poolScaling/delete", { poolId: pool.id });
    for (const m of scaled.body.machines ?? []) await post(apiUrl, apiKey, "machines/delete", { id: m.id });
  }
});

test(
  "a pool's page where the provision module is not enabled: no Scaling panel, no error",
  { timeout: 120_000, skip: fleetUrl ? false : "BETTER_COMPUTE_FLEET_URL is not set (scripts/test sets it)" },
  async () => {
    const created = await post(fleetUrl, fleetKey, "pools/create", { name: `no-scaling-${Date.now().toString(36)}` });
    assert.equal(created.status, 200, JSON.stringify(created.body));
    const pool = created.body.pool;
    const page = await signedIn(fleetUrl, fleetKey);
    await openPool(page, pool);
    assert.equal(await page.locator("#scaling").count(), 0, "no Scaling panel without the module");
    assert.match(await page.innerText("#flash"), /^\s*$/, "no error banner");
    await page.close();
  },
);
