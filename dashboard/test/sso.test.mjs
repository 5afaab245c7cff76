// Signs in to the dashboard through a real OpenID provider's login page, in the machine's
// headless Chromium (playwright-core, /usr/bin/chromium), against the live `better-compute dev`
// server scripts/test starts. That server must listen where its baseURL says (dev sets baseURL
// to http://127.0.0.1:PORT for a fixed --port) and allow plain-http issuers on loopback
// (BETTER_COMPUTE_AUTH_ALLOW_PRIVATE_ISSUERS=true). It reads:
//   BETTER_COMPUTE_URL            the API URL it printed ("API: …")
//   BETTER_COMPUTE_API_KEY        the admin key it printed ("API key: …")
//   BETTER_COMPUTE_OIDC_DEVICE_SERVER  the provider's binary, deviceop (default: where
//                                 scripts/setup builds it); missing, the test is skipped
//                                 unless BETTER_COMPUTE_REQUIRE_OIDC=1, when it fails
// The provider (github.com/zitadel/oidc/v3/example/server's main as internal/oidctest runs it:
// deviceop without its device client, listening on 127.0.0.1 only) is started here on a free
// loopback port and stopped at the end. Screenshots go to BETTER_COMPUTE_TEST_OUTPUT
// (default dashboard/test-results).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { accessSync, closeSync, constants, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const apiUrl = (process.env.BETTER_COMPUTE_URL ?? "").replace(/\/+$/, "");
const apiKey = process.env.BETTER_COMPUTE_API_KEY ?? "";
if (!apiUrl || !apiKey) {
  throw new Error("BETTER_COMPUTE_URL and BETTER_COMPUTE_API_KEY must be set; scripts/test sets them");
}
const apiOrigin = new URL(apiUrl).origin;
const callback = `${apiUrl}/auth/callback`;
const output = process.env.BETTER_COMPUTE_TEST_OUTPUT || fileURLToPath(new URL("../test-results/", import.meta.url));
mkdirSync(output, { recursive: true });

// The release internal/oidctest runs (oidctest.Version) and where scripts/setup installs it.
const OIDC_VERSION = "v3.52.0";
const user = {
  ID: "sso-user-1",
  Username: "dana",
  Password: "dana-password",
  FirstName: "Dana",
  LastName: "Example",
  Email: "dana@example.com",
  EmailVerified: true,
};

/** The provider's binary (deviceop), or null when it is not installed. */
function providerBinary() {
  const env = process.env.BETTER_COMPUTE_OIDC_DEVICE_SERVER;
  const candidates = env
    ? [env]
    : [join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "better-compute"), "/var/cache/better-compute"].map((d) =>
        join(d, `zitadel-oidc-${OIDC_VERSION}`, "bin", "deviceop"),
      );
  for (const p of candidates) {
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // Next.
    }
  }
  const msg = `the zitadel OpenID provider example is not installed (looked at ${candidates.join(", ")}): run scripts/setup`;
  if (process.env.BETTER_COMPUTE_REQUIRE_OIDC === "1") throw new Error(`${msg} (BETTER_COMPUTE_REQUIRE_OIDC=1 requires it)`);
  return null;
}

/** A port that was free on 127.0.0.1 a moment ago, where the provider listens. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Polls check until it returns true, failing with what describe says after timeoutMs. */
async function until(check, timeoutMs, describe) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out: ${describe()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Starts the provider with the user on a free port and resolves once its discovery document
 * names its issuer; the process runs in its own group so stop() reaches all of it.
 */
async function startProvider(bin, dir) {
  const usersFile = join(dir, "users.json");
  writeFileSync(usersFile, JSON.stringify({ [user.ID]: user }), { mode: 0o600 });
  const logFile = join(dir, "provider.log");
  const port = await freePort();
  const issuer = `http://localhost:${port}/`;
  const log = openSync(logFile, "a");
  const child = spawn(bin, [], {
    env: { ...process.env, PORT: String(port), REDIRECT_URI: callback, USERS_FILE: usersFile, DEVICE_CLIENT: "0" },
    stdio: ["ignore", log, log],
    detached: true,
  });
  closeSync(log);
  let exited = false;
  const gone = new Promise((resolve) => child.once("exit", () => resolve((exited = true))));
  const logText = () => {
    try {
      return readFileSync(logFile, "utf8");
    } catch {
      return "";
    }
  };
  const stop = async () => {
    if (exited) return;
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      return;
    }
    const killed = await Promise.race([gone, new Promise((r) => setTimeout(() => r(false), 10_000))]);
    if (!killed) {
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // Gone meanwhile.
      }
      await gone;
    }
  };
  try {
    await until(
      async () => {
        if (exited) throw new Error(`the OpenID provider exited on port ${port}:\n${logText()}`);
        try {
          const res = await fetch(`${issuer}.well-known/openid-configuration`, { signal: AbortSignal.timeout(2000) });
          return res.ok && (await res.json()).issuer === issuer;
        } catch {
          return false;
        }
      },
      30_000,
      () => `the OpenID provider on port ${port} serves its discovery document:\n${logText()}`,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { issuer, stop, log: logText };
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

const bin = providerBinary();
const method = `sso-${Date.now().toString(36)}`;
let dir;
let provider;
let context;
let userDataDir;

before(async () => {
  if (!bin) return;
  dir = mkdtempSync(join(tmpdir(), "bc-sso-"));
  provider = await startProvider(bin, dir);
  await call("authMethods/create", {
    authMethod: {
      name: method,
      displayName: "Example IdP",
      kind: "AUTH_METHOD_KIND_OIDC",
      issuer: provider.issuer,
      clientId: "web",
      clientSecret: "secret",
      redirectUris: [callback],
      // The example's ID token carries only sub: the user's ID.
      rules: [{ priority: 10, selectors: [{ claim: "sub", values: [user.ID] }], roles: ["ROLE_VIEWER"] }],
    },
  });
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
  if (provider) {
    await call("authMethods/delete", { name: method }).catch((err) => console.error("delete the auth method:", err.message));
    await provider.stop();
  }
  for (const d of [userDataDir, dir]) if (d) rmSync(d, { recursive: true, force: true });
});

test("sign in through the identity provider's login page, then sign out", { timeout: 120_000, skip: !bin && "the zitadel OpenID provider example is not installed: run scripts/setup" }, async () => {
  const page = await context.newPage();
  const keyed = [];
  page.on("request", (r) => {
    if (r.headers().authorization) keyed.push(r.url());
  });
  page.on("pageerror", (err) => console.error("page error:", err.message));

  await page.goto(`${apiOrigin}/dashboard/#/nodes`);
  await page.waitForSelector("#sso-tenant");
  assert.equal(await page.inputValue("#sso-tenant"), "root", "the tenant defaults to root");
  const button = page.locator(`#sso-methods button[data-method="${method}"]`);
  await button.waitFor({ timeout: 30_000 });
  assert.equal(await button.innerText(), "Sign in with Example IdP");
  await page.screenshot({ path: join(output, "sso-sign-in.png"), fullPage: true });

  // The provider's own login page, on its origin.
  await button.click();
  await page.waitForURL((u) => u.href.startsWith(provider.issuer), { timeout: 30_000 });
  await page.waitForSelector("input[name=username]");
  await page.screenshot({ path: join(output, "sso-provider-login.png") });
  await page.fill("input[name=username]", user.Username);
  await page.fill("input[name=password]", user.Password);
  await page.click("button[type=submit]");

  // Back on the dashboard, signed in with the cookie the callback set.
  await page.waitForURL((u) => u.origin === apiOrigin && u.pathname === "/dashboard/", { timeout: 30_000 }).catch(async (err) => {
    throw new Error(`${err.message}\nat ${page.url()}: ${await page.innerText("body").catch(() => "")}\nprovider log:\n${provider.log()}`);
  });
  assert.equal(new URL(page.url()).hash, "#/nodes", "the sign-in returns to the page it started from");
  await page.waitForSelector("#who", { timeout: 30_000 });
  assert.equal(await page.innerText("#who-principal"), `${method}:${user.ID}`);
  assert.equal(await page.innerText("#who-roles"), "viewer");
  assert.match(await page.innerText("#who-tenant"), /^root$/i, "the root tenant, by its display name");
  await page.waitForFunction(() => document.getElementById("view")?.dataset.loaded === "nodes", null, { timeout: 30_000 });
  assert.deepEqual(keyed, [], "no call carried an Authorization header");
  assert.equal(await page.evaluate(() => document.cookie.includes("bc_session")), false, "scripts cannot read the session");
  const session = (await context.cookies(apiOrigin)).find((c) => c.name === "bc_session");
  assert.ok(session, "the callback set the session cookie");
  assert.equal(session.httpOnly, true, "the session cookie is HttpOnly");
  assert.equal(session.sameSite, "Lax");
  await page.screenshot({ path: join(output, "sso-signed-in.png"), fullPage: true });

  // A reload resumes the cookie session.
  await page.reload();
  await page.waitForSelector("#who-principal", { timeout: 30_000 });
  assert.equal(await page.innerText("#who-principal"), `${method}:${user.ID}`);

  // Signing out ends the session at the API: the cookie no longer signs anyone in.
  await page.click("#sign-out");
  await page.waitForSelector("#sso-tenant");
  const me = await page.evaluate(async (url) => {
    const res = await fetch(`${url}/iam/whoAmI`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Better-Compute": "1" },
      body: "{}",
      credentials: "same-origin",
    });
    return res.status;
  }, apiUrl);
  assert.equal(me, 401, "the ended session's cookie is refused");
  await page.reload();
  await page.waitForSelector("#sso-tenant");
  assert.equal(await page.locator("#who").count(), 0, "after signing out a reload shows the sign-in");
  await page.close();
});
