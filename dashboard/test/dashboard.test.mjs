// Drives the dashboard in the machine's headless Chromium (playwright-core, /usr/bin/chromium)
// against a live `better-compute dev --sim 3` server. scripts/test starts that server with
// BETTER_COMPUTE_CORS_ALLOWED_ORIGINS set to BETTER_COMPUTE_DASHBOARD_ORIGIN and exports:
//   BETTER_COMPUTE_URL               the API URL it printed ("API: …")
//   BETTER_COMPUTE_API_KEY           the admin key it printed ("API key: …")
//   BETTER_COMPUTE_DASHBOARD_ORIGIN  an http://127.0.0.1:PORT origin the API allows, where this
//                                    test serves the built dashboard to check CORS
// Screenshots go to BETTER_COMPUTE_TEST_OUTPUT (default dashboard/test-results).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { extname, join, normalize } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const apiUrl = (process.env.BETTER_COMPUTE_URL ?? "").replace(/\/+$/, "");
const apiKey = process.env.BETTER_COMPUTE_API_KEY ?? "";
const allowedOrigin = process.env.BETTER_COMPUTE_DASHBOARD_ORIGIN ?? "";
if (!apiUrl || !apiKey || !allowedOrigin) {
  throw new Error(
    "BETTER_COMPUTE_URL, BETTER_COMPUTE_API_KEY and BETTER_COMPUTE_DASHBOARD_ORIGIN must be set; " +
      "scripts/test sets them (it starts `better-compute dev --sim 3` with " +
      "BETTER_COMPUTE_CORS_ALLOWED_ORIGINS=<the dashboard origin>)",
  );
}
const apiOrigin = new URL(apiUrl).origin;
const dist = fileURLToPath(new URL("../dist/", import.meta.url));
const output = process.env.BETTER_COMPUTE_TEST_OUTPUT || fileURLToPath(new URL("../test-results/", import.meta.url));
mkdirSync(output, { recursive: true });

const TYPES = { ".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css" };

/** Serves dist/ at the root of 127.0.0.1:port (0 for any), like a static host on another origin. */
function serveDist(port) {
  const server = createServer((req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url, "http://x").pathname)).replace(/^\/+/, "") || "index.html";
    try {
      const body = readFileSync(join(dist, path));
      res.writeHead(200, { "Content-Type": TYPES[extname(path)] ?? "application/octet-stream" });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return listen(server, port);
}

/** Answers 404 to everything and records what reached it. */
function trap() {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method, url: req.url, headers: req.headers });
    res.writeHead(404).end();
  });
  return listen(server, 0).then((s) => Object.assign(s, { requests }));
}

function listen(server, port) {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      const { port } = server.address();
      resolve({ origin: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(r)) });
    });
  });
}

let context;
let userDataDir;
const closers = [];

before(async () => {
  userDataDir = mkdtempSync(join(tmpdir(), "bc-chromium-"));
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: process.env.BETTER_COMPUTE_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
    ],
    viewport: { width: 1440, height: 900 },
  });
});

after(async () => {
  await context?.close();
  for (const close of closers) await close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
});

/** A new tab (its own sessionStorage) that records who got an Authorization header. */
async function newPage() {
  const page = await context.newPage();
  const keyed = [];
  page.on("request", (r) => {
    if (r.headers().authorization) keyed.push(new URL(r.url()).origin);
  });
  page.on("pageerror", (err) => console.error("page error:", err.message));
  return { page, keyed };
}

async function signIn(page, { url, trust = false } = {}) {
  await page.waitForSelector("#api-key");
  if (url) await page.fill("#api-url", url);
  await page.fill("#api-key", apiKey);
  if (trust) await page.check("#trust-origin");
  await page.click("#sign-in");
}

/** Calls the API's JSON route {group}/{method} with the admin key. */
async function call(route, body) {
  const res = await fetch(`${apiUrl}/${route}`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Better-Compute": "1", Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify(body),
  });
  const out = await res.json();
  assert.equal(res.status, 200, `${route}: ${JSON.stringify(out)}`);
  return out;
}

const nodeRows = (page) => page.locator("tr[data-node-id]");

async function expectNodes(page, n) {
  await page.waitForFunction((n) => document.querySelectorAll("tr[data-node-id]").length === n, n, { timeout: 30_000 });
}

async function pageLoaded(page, id) {
  await page.waitForFunction((id) => document.getElementById("view")?.dataset.loaded === id, id, { timeout: 30_000 });
}

test("same origin: sign in, see the 3 nodes, drain one", { timeout: 120_000 }, async () => {
  const { page, keyed } = await newPage();
  await page.goto(`${apiOrigin}/dashboard/`);
  await page.waitForSelector("#api-url");
  assert.equal(await page.inputValue("#api-url"), apiUrl, "the sign-in form offers this origin's API");
  assert.equal(await page.isVisible("#trust-origin"), false, "no trust question for the page's own origin");
  await signIn(page);
  await expectNodes(page, 3);
  await pageLoaded(page, "nodes");

  const rows = nodeRows(page);
  const texts = await rows.allInnerTexts();
  assert.ok(texts.every((t) => /ready|joining/.test(t)), `nodes not ready: ${texts.join(" | ")}`);
  assert.ok(texts.every((t) => /\d CPUs/.test(t) && /[GT]iB/.test(t)), "every node shows its inventory");
  assert.match(await page.innerText(".summary"), /3 nodes/);
  // Each connected node says how its session reaches the gateway: directly (h2) in dev.
  const via = await page.locator("tr[data-node-id] td.status .transport").allInnerTexts();
  assert.deepEqual(via, ["via h2", "via h2", "via h2"], "every simulated node is connected via h2");
  assert.match(
    (await page.locator("tr[data-node-id] td.status .transport").first().getAttribute("title")) ?? "",
    /^connected via h2 to \S+/,
  );

  const row = rows.filter({ has: page.locator("button", { hasText: "Drain" }) }).first();
  const id = await row.getAttribute("data-node-id");
  await row.locator("button", { hasText: "Drain" }).click();
  await page.waitForFunction(
    (id) => /draining|drained/.test(document.querySelector(`tr[data-node-id="${id}"] .state`)?.textContent ?? ""),
    id,
    { timeout: 30_000 },
  );
  const state = await page.innerText(`tr[data-node-id="${id}"] .state`);
  assert.match(state, /draining|drained/);
  assert.match(await page.innerText("#flash"), /drain done/);
  await page.screenshot({ path: join(output, "dashboard-nodes.png"), fullPage: true });

  await page.click('a[data-page="activity"]');
  await pageLoaded(page, "activity");
  await page.waitForFunction(() => document.querySelector("#audit")?.textContent?.includes("nodes/drain"), null, { timeout: 30_000 });
  await page.screenshot({ path: join(output, "dashboard-activity.png"), fullPage: true });

  // A pool of the simulated machines, and a lease in it, through the JSON API.
  const pool = (await call("pools/create", { name: `e2e-${Date.now().toString(36)}`, nodeSelector: { simulated: "true" } })).pool;
  const lease = (await call("leases/create", { poolId: pool.id, gpus: 2, duration: "3600s" })).lease;
  await page.click('a[data-page="pools"]');
  await pageLoaded(page, "pools");
  const card = page.locator(`[data-pool-id="${pool.id}"]`);
  assert.match(await card.innerText(), /GPUs leased/, "the pool shows its GPU capacity and use");
  assert.equal(await page.locator("#utilisation svg.chart").count(), 1, "the utilisation chart is drawn");
  // Shared capacity: the sim's tenant has granted nothing and nothing was preempted.
  assert.match(await card.innerText(), /Preempted leases keep their devices 30 s/, "the pool shows its preemption grace period");
  assert.match(await page.innerText("#grants"), /No grants: no other tenant may lease from your pools\./);
  assert.equal(await page.locator("#grants tr[data-grant-id]").count(), 0);
  assert.ok(
    (await page.locator("#grant-pool option").allInnerTexts()).includes(pool.name),
    "the grant form offers the pool",
  );
  assert.match(await page.innerText("#preemptions"), /No preemptions in the last 24 hours\./);
  // The form checks its input before calling the API.
  await page.selectOption("#grant-pool", pool.id);
  await page.click("#grant-submit");
  assert.match(await page.innerText("#grant-error"), /Enter the id of the tenant/);
  await page.screenshot({ path: join(output, "dashboard-pools.png"), fullPage: true });

  await page.click('a[data-page="leases"]');
  await pageLoaded(page, "leases");
  const leaseRow = await page.innerText(`tr[data-lease-id="${lease.id}"]`);
  assert.match(leaseRow, new RegExp(pool.name));
  assert.equal(await page.innerText(`tr[data-lease-id="${lease.id}"] td.priority`), "0", "the lease shows its priority");
  assert.doesNotMatch(leaseRow, /borrowing/, "a lease in an ungranted pool does not borrow");

  // Workflows: one made paused through the API is listed, its nodes shown, and it can be resumed
  // and paused again from the page.
  const wf = (
    await call("workflows/create", {
      name: "e2e upgrade",
      action: { upgrade: { version: "sim-2" } },
      target: { labelSelector: { simulated: "true" } },
      policy: { maxParallel: 1 },
      paused: true,
    })
  ).workflow;
  await page.click('a[data-page="workflows"]');
  await pageLoaded(page, "workflows");
  assert.match(await page.innerText(`tr[data-workflow-id="${wf.id}"]`), /e2e upgrade[\s\S]*paused/);
  await page.click(`tr[data-workflow-id="${wf.id}"] a`);
  await page.waitForSelector(`h1[data-workflow-id="${wf.id}"]`);
  assert.equal(await page.locator("tr[data-step]").count(), 3, "the workflow shows its three nodes");
  await page.click("#workflow-resume");
  await page.waitForFunction(() => document.getElementById("workflow-pause") !== null, null, { timeout: 30_000 });
  await page.click("#workflow-pause");
  await page.waitForFunction(() => document.getElementById("workflow-resume") !== null, null, { timeout: 30_000 });
  await page.screenshot({ path: join(output, "dashboard-workflow.png"), fullPage: true });
  await call("workflows/cancel", { id: wf.id });

  // Usage: the caller's own, then every tenant's in its pools, each with a tenant column; the
  // CSV export is saved as a file.
  await page.click('a[data-page="usage"]');
  await pageLoaded(page, "usage");
  assert.equal(await page.locator("#usage .error").count(), 0, await page.innerText("#usage"));
  assert.match(await page.innerText("#usage"), /tenant|No metered use in this period/i);
  await page.selectOption("#usage-scope", { label: "usage in my pools by tenant" });
  await page.waitForFunction(() => /what you charge back/.test(document.getElementById("usage")?.textContent ?? ""), null, { timeout: 30_000 });
  await pageLoaded(page, "usage");
  assert.equal(await page.locator("#usage .error").count(), 0, await page.innerText("#usage"));
  const [download] = await Promise.all([page.waitForEvent("download", { timeout: 30_000 }), page.click("#usage-csv")]);
  assert.match(download.suggestedFilename(), /^usage-my-pools-.*\.csv$/);
  const csv = readFileSync(await download.path(), "utf8");
  assert.match(csv, /^period_start,period_end,tenant_id,pool_id,pool_name,resource,model,quantity,unit,unhealthy_quantity,active_quantity,mean_utilization\r?\n/);
  await page.screenshot({ path: join(output, "dashboard-usage.png"), fullPage: true });

  // Utilisation: the chart over time, the efficiency table and the idle leases, of the tenant
  // and then of the pool.
  await page.click('a[data-page="utilization"]');
  await pageLoaded(page, "utilization");
  for (const id of ["#utilization", "#efficiency", "#idle-leases"]) {
    assert.equal(await page.locator(`${id} .error`).count(), 0, await page.innerText(id));
  }
  assert.equal(await page.locator("#utilization-chart").count(), 1, "the utilisation chart is drawn");
  await page.selectOption("#utilization-target", `pool:${pool.id}`);
  await page.waitForSelector(`#utilization[data-target="pool:${pool.id}"] #utilization-chart`, { timeout: 30_000 });
  assert.equal(await page.locator("#utilization .error").count(), 0, await page.innerText("#utilization"));
  await page.screenshot({ path: join(output, "dashboard-utilization.png"), fullPage: true });
  await call("leases/release", { id: lease.id });

  assert.deepEqual([...new Set(keyed)], [apiOrigin], "the key went to the API's origin only");
  const stored = await page.evaluate(() => ({ session: sessionStorage.length, local: localStorage.length }));
  assert.deepEqual(stored, { session: 1, local: 0 }, "the key is kept in sessionStorage only");

  // A link to another API does not carry this session's key there.
  const other = await trap();
  closers.push(other.close);
  await page.goto(`${apiOrigin}/dashboard/?api=${encodeURIComponent(other.origin + "/api")}`);
  await page.waitForSelector("#signin-note");
  assert.equal(await page.inputValue("#api-url"), `${other.origin}/api`);
  assert.equal(await page.inputValue("#api-key"), "", "the stored key is not offered for another API");
  // Typing a key is not enough either: the user must confirm the foreign origin.
  await page.fill("#api-key", apiKey);
  await page.click("#sign-in");
  await page.waitForFunction(() => /Not sending the key/.test(document.getElementById("signin-error")?.textContent ?? ""));
  await page.waitForTimeout(500);
  assert.equal(other.requests.length, 0, `requests reached the unconfigured origin: ${JSON.stringify(other.requests)}`);
  assert.ok(!keyed.includes(other.origin), "no request to the unconfigured origin carried the key");
  await page.close();
});

test("the Remediations page: a remediation started through the API, its ladder position, history and return from service", { timeout: 120_000 }, async () => {
  const { page } = await newPage();
  page.on("dialog", (d) => void d.accept());
  await page.goto(`${apiOrigin}/dashboard/`);
  await signIn(page);
  await pageLoaded(page, "nodes");
  // The "service" ladder (drain, then service) sends the node no command: the other tests' fleet
  // is left as it was once the node is returned. The last simulated node, no lease on it.
  const nodes = (await call("nodes/list", {})).nodes;
  const node = nodes[nodes.length - 1];
  const rem = (await call("remediations/create", { nodeId: node.id, reason: "e2e: the dashboard shows it", ladder: "service" })).remediation;
  try {
    let state = rem.state;
    for (let i = 0; i < 300 && state !== "STATE_SERVICE"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      state = (await call("remediations/get", { id: rem.id })).remediation.state;
    }
    assert.equal(state, "STATE_SERVICE", "the remediation reached service");
    await page.click('a[data-page="remediations"]');
    await pageLoaded(page, "remediations");
    const row = page.locator(`tr[data-remediation-id="${rem.id}"]`);
    await row.waitFor({ timeout: 30_000 });
    const text = await row.innerText();
    assert.match(text, new RegExp(node.hostname), "the row names the node");
    assert.match(text, /e2e: the dashboard shows it/);
    assert.match(text, /service/, "the row shows the ladder and the state");
    assert.match(await row.locator("td.position a").innerText(), new RegExp(`^\\d+/${rem.steps.length} \\w+`), "the row says where it is on its ladder");
    assert.equal(await row.locator(".ladder .ladder-step").count(), rem.steps.length, "the strip has a mark per step");
    await page.screenshot({ path: join(output, "dashboard-remediations.png"), fullPage: true });

    // The filter by state keeps the ones in that state.
    await page.selectOption("#remediation-state", { label: "cancelled" });
    await pageLoaded(page, "remediations");
    await page.waitForFunction((id) => document.querySelector(`tr[data-remediation-id="${id}"]`) === null, rem.id, { timeout: 30_000 });
    await page.selectOption("#remediation-state", { label: "all states" });
    await pageLoaded(page, "remediations");

    // A row opens the remediation with its history; Return from service returns it.
    await page.locator(`tr[data-remediation-id="${rem.id}"] td`).first().click();
    await page.waitForSelector(`h1[data-remediation-id="${rem.id}"]`);
    assert.equal(await page.locator("#remediation .ladder .ladder-step").count(), rem.steps.length);
    assert.equal(await page.locator("tr[data-ladder-step]").count(), rem.steps.length, "the ladder's steps are listed");
    await page.screenshot({ path: join(output, "dashboard-remediation.png"), fullPage: true });
    await page.click("#remediation .remediation-return");
    await page.waitForFunction(() => /returned/.test(document.querySelector("h1[data-remediation-id]")?.textContent ?? ""), null, { timeout: 30_000 });
  } finally {
    const r = (await call("remediations/get", { id: rem.id })).remediation;
    if (r.state === "STATE_WAITING" || r.state === "STATE_RUNNING") await call("remediations/cancel", { id: rem.id });
    if (r.state === "STATE_SERVICE") await call("remediations/returnFromService", { id: rem.id });
    await fetch(`${apiUrl}/nodes/uncordon`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Better-Compute": "1", Authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ id: node.id }),
    });
    await page.close();
  }
});

test("the API page: the reference from openapi.json, signed in and signed out", { timeout: 120_000 }, async () => {
  const { page, keyed } = await newPage();
  await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: apiOrigin });
  await page.goto(`${apiOrigin}/dashboard/`);
  await signIn(page);
  await pageLoaded(page, "nodes");
  await page.click('a[data-page="api"]');
  await pageLoaded(page, "api");
  assert.match(await page.innerText("#api-overview"), /Authorization: Bearer/, "the overview is info.description");
  const list = page.locator('details[data-route="nodes/list"]');
  assert.match(await list.locator("summary").innerText(), /nodes\/list[\s\S]*nodes\.read/, "nodes/list shows its permission");
  assert.match(await page.innerText('details[data-route="system/info"] summary'), /public/);

  // The filter keeps the methods whose name matches.
  await page.fill("#api-filter", "leases/cre");
  assert.equal(await list.isVisible(), false, "the filter hides nodes/list");
  const create = page.locator('details[data-route="leases/create"]');
  assert.equal(await create.isVisible(), true);
  assert.match(await create.locator("summary").innerText(), /leases\.create[\s\S]*idempotent[\s\S]*audited/);
  await create.locator("summary").click();
  const poolId = create.locator('tr[data-field="poolId"]').first();
  assert.match(await poolId.innerText(), /poolId\s+string\s+A pool of the caller's tenant/);
  assert.match(await create.locator(".api-route").innerText(), new RegExp(`POST ${new URL(apiUrl).pathname}/leases/create`));
  const curl = await create.locator("pre.api-curl").innerText();
  assert.ok(curl.startsWith(`curl -sS -X POST '${apiUrl}/leases/create'`), curl);
  assert.match(curl, /Authorization: Bearer \$BETTER_COMPUTE_API_KEY/);
  assert.match(curl, /"poolId": "\$POOL_ID"/);
  await create.locator("button.api-copy").click();
  await page.waitForFunction(() => /Copied|Select/.test(document.querySelector('[data-route="leases/create"] .api-copied')?.textContent ?? ""));
  if ((await create.locator(".api-copied").innerText()) === "Copied.") {
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), curl, "Copy puts the command on the clipboard");
  }
  // A message type expands below its row, and an enum in it shows its values.
  await create.locator('button[data-type="bettercompute.leases.v1.Lease"]').first().click();
  const lease = create.locator('.api-type[data-type="bettercompute.leases.v1.Lease"]');
  await lease.locator('button[data-type="bettercompute.leases.v1.LeaseState"]').first().click();
  assert.match(await lease.locator('tr[data-enum-value="LEASE_STATE_PLACED"]').innerText(), /Holding its devices/);
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(output, "dashboard-api.png"), fullPage: true });

  // The filter and the open method outlive the app's refresh; a link to a method opens it.
  await page.click('a[data-page="nodes"]');
  await pageLoaded(page, "nodes");
  await page.goto(`${apiOrigin}/dashboard/#/api/nodes/drain`);
  await pageLoaded(page, "api");
  await page.waitForFunction(() => document.querySelector('details[data-route="nodes/drain"]')?.open === true);
  assert.match(await page.innerText('details[data-route="nodes/drain"]'), /Permission: nodes\.operate/);
  await page.close();

  // Signed out: the sign-in form links to the reference, read without a key.
  const out = await newPage();
  await out.page.goto(`${apiOrigin}/dashboard/`);
  await out.page.click("#api-reference-link");
  await pageLoaded(out.page, "api");
  assert.match(await out.page.innerText('details[data-route="nodes/list"] summary'), /nodes\.read/);
  assert.match(await out.page.innerText("header"), /not signed in/);
  await out.page.click('details[data-route="leases/create"] summary');
  assert.match(await out.page.innerText('details[data-route="leases/create"] tr[data-field="poolId"]'), /poolId/);
  await out.page.click("#reference-sign-in");
  await out.page.waitForSelector("#api-key");
  assert.deepEqual(out.keyed, [], "no key was sent");
  assert.deepEqual(keyed.filter((o) => o !== apiOrigin), [], "the signed-in tab sent the key to the API only");
  await out.page.close();
});

test("another origin listed in cors.allowedOrigins: the preflight passes and the dashboard works", { timeout: 120_000 }, async () => {
  // The preflight a browser sends for the dashboard's calls, by hand.
  const preflight = (origin) =>
    fetch(`${apiUrl}/bettercompute.nodes.v1.NodesService/List`, {
      method: "OPTIONS",
      headers: {
        Origin: origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,connect-protocol-version,content-type,x-better-compute",
      },
    });
  const ok = await preflight(allowedOrigin);
  assert.ok(ok.status === 204 || ok.status === 200, `preflight status ${ok.status}`);
  assert.equal(ok.headers.get("access-control-allow-origin"), allowedOrigin);
  const allowed = (ok.headers.get("access-control-allow-headers") ?? "").toLowerCase();
  for (const h of ["authorization", "x-better-compute", "connect-protocol-version"]) {
    assert.ok(allowed.includes(h), `preflight does not allow ${h}: ${allowed}`);
  }
  const refused = await preflight("http://127.0.0.1:1");
  assert.equal(refused.headers.get("access-control-allow-origin"), null, "an unlisted origin is not allowed");

  const site = await serveDist(Number(new URL(allowedOrigin).port));
  closers.push(site.close);
  const { page, keyed } = await newPage();
  await page.goto(`${site.origin}/`);
  await page.waitForSelector("#api-url");
  await page.fill("#api-url", apiUrl);
  assert.equal(await page.isVisible("#trust-origin"), true, "a foreign API origin must be confirmed");
  await signIn(page, { trust: true });
  await expectNodes(page, 3);
  await pageLoaded(page, "nodes");
  assert.deepEqual([...new Set(keyed)], [apiOrigin], "the key went to the configured API only");
  await page.screenshot({ path: join(output, "dashboard-cross-origin.png"), fullPage: true });
  await page.close();
});

test("an origin not in cors.allowedOrigins: the browser sends no call and the dashboard says why", { timeout: 60_000 }, async () => {
  const site = await serveDist(0);
  closers.push(site.close);
  const { page } = await newPage();
  await page.goto(`${site.origin}/`);
  await page.waitForSelector("#api-url");
  await page.fill("#api-url", apiUrl);
  await signIn(page, { trust: true });
  await page.waitForFunction(() => /cors\.allowedOrigins/.test(document.getElementById("signin-error")?.textContent ?? ""), null, {
    timeout: 30_000,
  });
  assert.equal(await nodeRows(page).count(), 0);
  await page.close();
});
