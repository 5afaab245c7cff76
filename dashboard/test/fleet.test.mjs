// Drives the dashboard's nodes page in headless Chromium against a fleet of 10,000 nodes: a
// second `better-compute dev` (no simulated machines) whose database scripts/test seeds with
// fleet10k.sql. scripts/test exports:
//   BETTER_COMPUTE_FLEET_URL      that server's API URL
//   BETTER_COMPUTE_FLEET_API_KEY  its admin key
// The page must show true totals from nodes/summary and one server-side page of rows, not the
// first few hundred nodes. Screenshots go to BETTER_COMPUTE_TEST_OUTPUT (default
// dashboard/test-results).
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const apiUrl = (process.env.BETTER_COMPUTE_FLEET_URL ?? "").replace(/\/+$/, "");
const apiKey = process.env.BETTER_COMPUTE_FLEET_API_KEY ?? "";
const output = process.env.BETTER_COMPUTE_TEST_OUTPUT || fileURLToPath(new URL("../test-results/", import.meta.url));
mkdirSync(output, { recursive: true });

let context;
let userDataDir;

before(async () => {
  if (!apiUrl) return;
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

const text = (page, selector) => page.innerText(selector);

/** Waits until selector's text matches re, and returns how long that took. */
async function waitText(page, selector, re) {
  const start = Date.now();
  await page.waitForFunction(
    ([selector, source]) => new RegExp(source).test(document.querySelector(selector)?.textContent ?? ""),
    [selector, re.source],
    { timeout: 30_000 },
  );
  return Date.now() - start;
}

test(
  "10,000 nodes: true totals, filter by GPU model, server-side pages",
  { timeout: 120_000, skip: apiUrl ? false : "BETTER_COMPUTE_FLEET_URL is not set (scripts/test sets it)" },
  async () => {
    const page = await context.newPage();
    page.on("pageerror", (err) => console.error("page error:", err.message));
    await page.goto(`${new URL(apiUrl).origin}/dashboard/`);
    await page.waitForSelector("#api-key");
    await page.fill("#api-key", apiKey);
    await page.click("#sign-in");
    const first = await waitText(page, ".summary", /^10,000 nodes: 9,800 ready/);
    await page.waitForFunction(() => document.querySelectorAll("tr[data-node-id]").length === 100, null, { timeout: 30_000 });
    assert.match(await text(page, "#nodes-range"), /^1–100 of 10,000$/);
    assert.match(await text(page, ".summary"), /59,000 GPUs/);

    await page.selectOption("#filter-gpu", "H100");
    const filtered = await waitText(page, ".summary", /^4,000 nodes: .*\(of 10,000 in the fleet\)/);
    assert.match(await text(page, "#nodes-range"), /^1–100 of 4,000$/);
    const gpus = await page.locator("tr[data-node-id] td.gpus").allInnerTexts();
    assert.equal(gpus.length, 100);
    assert.ok(gpus.every((g) => g === "8 × H100"), `rows that are not H100 nodes: ${gpus.filter((g) => g !== "8 × H100")}`);
    await page.screenshot({ path: join(output, "dashboard-fleet-10k.png"), fullPage: false });

    await page.click("#nodes-next");
    await waitText(page, "#nodes-range", /^101–200 of 4,000$/);

    // Search by hostname within the filter: fleet-00010 … fleet-00019, of which 4 are H100 nodes.
    await page.fill("#filter-search", "fleet-0001");
    await page.press("#filter-search", "Enter");
    await waitText(page, ".summary", /^4 nodes: /);
    const hosts = await page.locator("tr[data-node-id]").evaluateAll((rows) => rows.map((r) => r.dataset.hostname));
    assert.deepEqual(hosts.sort(), ["fleet-00010", "fleet-00011", "fleet-00012", "fleet-00013"]);
    assert.equal(await page.isDisabled("#nodes-next"), true);

    console.log(`fleet of 10,000: first page ${first} ms after sign-in; GPU-model filter ${filtered} ms`);
    await page.close();
  },
);
