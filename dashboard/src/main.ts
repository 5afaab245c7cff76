// The dashboard: sign in with an API key or through the identity provider, then pages of nodes, GPUs, remediations, pools, leases, workflows, usage,
// activity and the API reference; the reference also opens without a key.
import "./style.css";

import { Code, ConnectError, iamv1, type BetterCompute } from "@better-compute/client";

import { renderReference } from "./api.js";
import { h } from "./dom.js";
import { pages, type PageContext } from "./pages.js";
import {
  clearSession,
  clientFor,
  defaultApiUrl,
  isKeySession,
  KeyRefusedError,
  loadSession,
  normalizeApiUrl,
  saveSession,
  type KeySession,
  type Session,
} from "./session.js";
import {
  cookieCapable,
  currentPath,
  loginMethods,
  startLogin,
  rememberedTenant,
  rememberTenant,
  resumeCookieSession,
  signOutCookie,
} from "./sso.js";

const app = document.getElementById("app")!;
const REFRESH_MS = 10_000;

/** The API a link asks for with ?api=, if any. */
function linkedApi(): string | null {
  const raw = new URLSearchParams(location.search).get("api");
  if (!raw) return null;
  try {
    return normalizeApiUrl(raw);
  } catch {
    return null;
  }
}

function describe(err: unknown, apiUrl: string): string {
  if (err instanceof KeyRefusedError) return err.message;
  const ce = ConnectError.from(err);
  if (ce.cause instanceof KeyRefusedError) return ce.cause.message;
  switch (ce.code) {
    case Code.Unauthenticated:
      return "The API refused this key (unknown, revoked or expired).";
    case Code.PermissionDenied:
      return `This key may not do that: ${ce.rawMessage}`;
    case Code.Unknown:
    case Code.Unavailable:
      if (/fetch|network|load failed/i.test(ce.rawMessage)) {
        const origin = new URL(apiUrl).origin;
        return origin === location.origin
          ? `Could not reach the API at ${apiUrl}.`
          : `Could not reach the API at ${apiUrl}. A page on ${location.origin} can call it only if the ` +
              `API lists ${location.origin} in cors.allowedOrigins.`;
      }
  }
  return ce.rawMessage || String(err);
}

async function showSignIn(opts: { apiUrl?: string; message?: string } = {}): Promise<void> {
  const apiUrl = opts.apiUrl ?? (await defaultApiUrl());
  const urlInput = h("input", { id: "api-url", name: "api-url", type: "url", required: true, value: apiUrl, autocomplete: "url" });
  const keyInput = h("input", { id: "api-key", name: "api-key", type: "password", required: true, autocomplete: "off", placeholder: "bck_…" });
  const trust = h("input", { id: "trust-origin", type: "checkbox" });
  const trustLabel = h("span");
  const trustRow = h("label", { class: "trust", for: "trust-origin" }, trust, " ", trustLabel);
  const error = h("p", { id: "signin-error", class: "error", role: "alert" });
  const updateTrust = () => {
    let origin = "";
    try {
      origin = new URL(normalizeApiUrl(urlInput.value)).origin;
    } catch {
      // Shown on submit.
    }
    const foreign = origin !== "" && origin !== location.origin;
    trustRow.hidden = !foreign;
    trust.checked = trust.checked && foreign;
    trustLabel.textContent = `Send my key to ${origin}, which is not this page's origin (${location.origin})`;
  };
  urlInput.addEventListener("input", updateTrust);
  updateTrust();
  const button = h("button", { type: "submit", id: "sign-in" }, "Sign in");
  const reference = h("a", { href: "#/api", id: "api-reference-link" }, "API reference");
  const form = h(
    "form",
    { class: "signin", novalidate: true },
    h("h1", null, "Better Compute"),
    opts.message && h("p", { class: "note", id: "signin-note" }, opts.message),
    h("label", { for: "api-url" }, "API URL"),
    urlInput,
    h("label", { for: "api-key" }, "API key"),
    keyInput,
    trustRow,
    button,
    error,
    h("p", { class: "sub" }, "The key stays in this tab (sessionStorage) and is sent only to the API URL above."),
    h("p", { class: "sub" }, reference, " of the API URL above, no key needed."),
  );
  reference.addEventListener("click", (e) => {
    e.preventDefault();
    let url = apiUrl;
    try {
      url = normalizeApiUrl(urlInput.value);
    } catch {
      // The default, then.
    }
    location.hash = "#/api";
    showReference(url);
  });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    error.textContent = "";
    let session: KeySession;
    try {
      session = { apiUrl: normalizeApiUrl(urlInput.value), apiKey: keyInput.value.trim() };
    } catch (err) {
      error.textContent = `API URL: ${(err as Error).message}`;
      return;
    }
    if (!session.apiKey) {
      error.textContent = "Enter an API key.";
      return;
    }
    const origin = new URL(session.apiUrl).origin;
    if (origin !== location.origin && !trust.checked) {
      // Not configured by the user: nothing is sent until they say so.
      error.textContent = `Not sending the key: ${origin} is not this page's origin. Tick the box to confirm you trust it.`;
      return;
    }
    button.disabled = true;
    try {
      const bc = clientFor(session);
      const me = await bc.iam.whoAmI({});
      saveSession(session);
      if (linkedApi() !== null) history.replaceState(null, "", location.pathname + location.hash);
      showApp(session, bc, me);
    } catch (err) {
      error.textContent = describe(err, session.apiUrl);
      button.disabled = false;
    }
  });
  const sso = ssoForm(() => {
    try {
      return normalizeApiUrl(urlInput.value);
    } catch {
      return null;
    }
  });
  urlInput.addEventListener("change", sso.reload);
  app.replaceChildren(form, sso.form);
  (opts.apiUrl && !keyInput.value ? keyInput : urlInput).focus();
}

/**
 * "Sign in with your identity provider": a tenant (remembered), its OIDC methods from
 * auth/loginMethods, and a button per method that starts its sign-in, which returns to this page
 * with the session cookie. apiUrl is the API the form above names (null while it is not a URL).
 */
function ssoForm(apiUrl: () => string | null): { form: HTMLFormElement; reload: () => void } {
  const tenantInput = h("input", { id: "sso-tenant", name: "sso-tenant", type: "text", required: true, value: rememberedTenant(), autocomplete: "organization" });
  const methods = h("div", { id: "sso-methods", class: "sso-methods" });
  const status = h("p", { id: "sso-status", class: "sub", role: "status" });
  let generation = 0;
  const reload = async () => {
    const gen = ++generation;
    const api = apiUrl();
    const tenant = tenantInput.value.trim();
    methods.replaceChildren();
    status.textContent = "";
    if (!api || !tenant) {
      status.textContent = api ? "Enter your tenant." : "Enter the API URL above.";
      return;
    }
    if (!cookieCapable(api)) {
      status.textContent = `Sign-in through an identity provider works where the API serves the dashboard: open ${new URL(api).origin}/dashboard/.`;
      return;
    }
    status.textContent = "Loading…";
    try {
      const list = await loginMethods(api, tenant);
      if (gen !== generation) return;
      status.textContent = list.length === 0 ? `Tenant "${tenant}" has no identity provider to sign in with.` : "";
      methods.replaceChildren(
        ...list.map((m) => {
          const b = h("button", { type: "button", class: "sso-method", "data-method": m.name }, `Sign in with ${m.displayName || m.name}`);
          b.addEventListener("click", () => {
            rememberTenant(tenant);
            b.disabled = true;
            status.textContent = "";
            startLogin(api, tenant, m.name, currentPath()).then(
              (to) => location.assign(to),
              (err: unknown) => {
                b.disabled = false;
                status.textContent = `Sign-in did not start: ${err instanceof Error ? err.message : String(err)}`;
              },
            );
          });
          return b;
        }),
      );
    } catch (err) {
      if (gen === generation) status.textContent = describe(err, api);
    }
  };
  const form = h(
    "form",
    { class: "signin", id: "sso-form", novalidate: true },
    h("h2", null, "Sign in with your identity provider"),
    h("label", { for: "sso-tenant" }, "Tenant"),
    tenantInput,
    methods,
    status,
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    void reload();
  });
  tenantInput.addEventListener("change", () => void reload());
  void reload();
  return { form, reload: () => void reload() };
}

function tenantOf(me: iamv1.WhoAmIResponse): PageContext["tenant"] {
  return { id: me.tenant?.id ?? "", name: me.tenant?.displayName || me.tenant?.name || "" };
}

/** The roles of whoAmI as their lower-case names: "viewer, operator". */
function roleNames(me: iamv1.WhoAmIResponse): string {
  return me.roles.map((r) => (iamv1.Role[r] ?? String(r)).toLowerCase()).join(", ");
}

function showApp(session: Session, bc: BetterCompute, me: iamv1.WhoAmIResponse): void {
  const principal = me.principal?.name ?? "";
  const tenant = tenantOf(me);
  const view = h("main", { id: "view" });
  const flash = h("div", { id: "flash", role: "status" });
  const links = Object.entries(pages).map(([id, p]) => h("a", { href: `#/${id}`, "data-page": id }, p.title));
  const signOut = h("button", { type: "button", class: "link", id: "sign-out" }, "Sign out");
  app.replaceChildren(
    h(
      "header",
      null,
      h("span", { class: "brand" }, "Better Compute"),
      h("nav", null, links),
      h(
        "span",
        { class: "who", id: "who", title: session.apiUrl },
        h("span", { id: "who-principal" }, principal),
        " (",
        h("span", { id: "who-roles" }, roleNames(me) || "no roles"),
        ") in ",
        h("span", { id: "who-tenant" }, tenant.name || tenant.id),
        ` @ ${new URL(session.apiUrl).host}`,
        isKeySession(session) ? "" : " · signed in with your identity provider",
      ),
      signOut,
    ),
    flash,
    view,
  );
  let rendering: Promise<void> | null = null;
  let again = false;
  const current = () => {
    const id = location.hash.replace(/^#\/?/, "").split("/")[0]; // #/workflows/<id> is the workflows page, #/remediations/<id> the remediations page
    return id in pages ? id : "nodes";
  };
  const ctx: PageContext = {
    bc,
    apiUrl: session.apiUrl,
    tenant,
    flash(message, kind = "ok") {
      flash.replaceChildren(h("p", { class: kind }, message));
    },
    async refresh() {
      if (rendering) {
        again = true;
        return rendering;
      }
      const id = current();
      for (const a of links) a.classList.toggle("active", a.dataset.page === id);
      document.title = `${pages[id].title} · Better Compute`;
      rendering = pages[id]
        .render(ctx, view)
        .catch((err: unknown) => {
          if (ConnectError.from(err).code === Code.Unauthenticated) {
            stop();
            clearSession();
            void showSignIn({
              apiUrl: session.apiUrl,
              message: isKeySession(session)
                ? "The API no longer accepts this key. Sign in again."
                : "Your session ended (signed out, expired or revoked). Sign in again.",
            });
            return;
          }
          ctx.flash(describe(err, session.apiUrl), "error");
        })
        .finally(() => {
          rendering = null;
          view.dataset.loaded = id;
        });
      await rendering;
      if (again) {
        again = false;
        await ctx.refresh();
      }
    },
  };
  const onHash = () => {
    flash.replaceChildren();
    view.replaceChildren(h("p", { class: "loading" }, "Loading…"));
    delete view.dataset.loaded;
    void ctx.refresh();
  };
  const timer = setInterval(() => {
    if (document.visibilityState === "visible" && !rendering) void ctx.refresh();
  }, REFRESH_MS);
  const stop = () => {
    clearInterval(timer);
    window.removeEventListener("hashchange", onHash);
  };
  window.addEventListener("hashchange", onHash);
  signOut.addEventListener("click", async () => {
    stop();
    clearSession();
    let message: string | undefined;
    if (!isKeySession(session)) {
      signOut.disabled = true;
      try {
        await signOutCookie(session);
      } catch (err) {
        message = `Signing out at the API failed: ${describe(err, session.apiUrl)}`;
      }
    }
    void showSignIn({ apiUrl: session.apiUrl, message });
  });
  onHash();
}

const onReference = () => /^#\/?api(\/|$)/.test(location.hash);

/**
 * The API reference without signing in: the document is public, fetched without a key. Leaving
 * #/api, or Sign in, goes to the sign-in form.
 */
function showReference(apiUrl: string): void {
  const view = h("main", { id: "view" });
  const flash = h("div", { id: "flash", role: "status" });
  const signIn = h("button", { type: "button", class: "link", id: "reference-sign-in" }, "Sign in");
  app.replaceChildren(
    h(
      "header",
      null,
      h("span", { class: "brand" }, "Better Compute"),
      h("nav", null, h("a", { href: "#/api", "data-page": "api", class: "active" }, "API")),
      h("span", { class: "who", title: apiUrl }, `not signed in @ ${new URL(apiUrl).host}`),
      signIn,
    ),
    flash,
    view,
  );
  document.title = "API · Better Compute";
  const render = () => {
    if (!onReference()) {
      leave();
      return;
    }
    renderReference(apiUrl, view)
      .catch((err: unknown) => {
        view.replaceChildren();
        flash.replaceChildren(h("p", { class: "error" }, err instanceof Error ? err.message : String(err)));
      })
      .finally(() => (view.dataset.loaded = "api"));
  };
  const leave = () => {
    window.removeEventListener("hashchange", render);
    void showSignIn({ apiUrl });
  };
  window.addEventListener("hashchange", render);
  signIn.addEventListener("click", () => {
    history.replaceState(null, "", location.pathname + location.search);
    leave();
  });
  view.replaceChildren(h("p", { class: "loading" }, "Loading…"));
  render();
}

async function boot(): Promise<void> {
  const session = loadSession();
  const linked = linkedApi();
  if (session && (linked === null || linked === session.apiUrl)) {
    try {
      const bc = clientFor(session);
      showApp(session, bc, await bc.iam.whoAmI({}));
      return;
    } catch (err) {
      if (ConnectError.from(err).code === Code.Unauthenticated) clearSession();
      return showSignIn({ apiUrl: session.apiUrl, message: describe(err, session.apiUrl) });
    }
  }
  if (session && linked !== null) {
    // A link asks for another API: the key given for the session's API is not sent there.
    return showSignIn({
      apiUrl: linked,
      message: `This link opens the API at ${linked}. Your key for ${new URL(session.apiUrl).origin} is not sent there: enter a key for this API to continue.`,
    });
  }
  // No key: the session cookie of a sign-in through the identity provider, if the API takes it.
  const apiUrl = linked ?? (await defaultApiUrl());
  let message: string | undefined;
  try {
    const c = await resumeCookieSession(apiUrl);
    if (c) {
      if (linked !== null) history.replaceState(null, "", location.pathname + location.hash);
      return showApp(c.session, c.bc, c.me);
    }
  } catch (err) {
    message = describe(err, apiUrl);
  }
  if (onReference()) return showReference(apiUrl);
  return showSignIn({ apiUrl: linked ?? undefined, message });
}

void boot();
