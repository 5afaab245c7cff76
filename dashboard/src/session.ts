// The signed-in session: which API the user chose and the key they gave for it. Both live in
// sessionStorage (gone with the tab), and the key goes only to the API the user configured: every
// request passes through keyGuardedFetch, which refuses any other origin or path.
import { createClient, type BetterCompute } from "@better-compute/client";

const STORAGE_KEY = "better-compute.session";

export interface Session {
  /** The API base URL, for example "https://compute.example.com/api" (no trailing slash). */
  apiUrl: string;
  apiKey: string;
}

/** Thrown instead of sending the key to an origin the user did not configure. */
export class KeyRefusedError extends Error {
  constructor(readonly origin: string) {
    super(`Refused to send the API key to ${origin}: it is not the API this session was signed in to.`);
    this.name = "KeyRefusedError";
  }
}

/** Checks and normalises an API URL: http(s), no user info, query or fragment, no trailing slash. */
export function normalizeApiUrl(raw: string, base: string = location.href): string {
  let u: URL;
  try {
    u = new URL(raw.trim(), base);
  } catch {
    throw new Error(`"${raw}" is not a URL`);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") {
    throw new Error(`the API URL must start with https:// or http://, got ${u.protocol}`);
  }
  if (u.username || u.password) {
    throw new Error("the API URL must not contain a user name or password");
  }
  if (u.search || u.hash) {
    throw new Error("the API URL must not have a query or fragment");
  }
  return u.origin + u.pathname.replace(/\/+$/, "");
}

export function loadSession(): Session | null {
  try {
    const s = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? "null") as Partial<Session> | null;
    if (!s || typeof s.apiUrl !== "string" || typeof s.apiKey !== "string" || !s.apiKey) return null;
    return { apiUrl: normalizeApiUrl(s.apiUrl), apiKey: s.apiKey };
  } catch {
    return null;
  }
}

export function saveSession(s: Session): void {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(s));
}

export function clearSession(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

/**
 * A fetch that only reaches the configured API: the same origin as apiUrl and a path below it.
 * Anything else is refused before a byte is sent. It also never sends cookies, never follows a
 * redirect (which could carry the request elsewhere) and sends no Referer.
 */
export function keyGuardedFetch(apiUrl: string, next: typeof fetch = (i, init) => fetch(i, init)): typeof fetch {
  const api = new URL(apiUrl);
  const prefix = api.pathname.replace(/\/+$/, "") + "/";
  return (input, init) => {
    const target = new URL(input instanceof Request ? input.url : String(input), location.href);
    if (target.origin !== api.origin || !target.pathname.startsWith(prefix)) {
      return Promise.reject(new KeyRefusedError(target.origin));
    }
    return next(input, {
      ...init,
      credentials: "omit",
      redirect: "error",
      referrerPolicy: "no-referrer",
      cache: "no-store",
    });
  };
}

/** The SDK's clients for a session, every request going through keyGuardedFetch. */
export function clientFor(s: Session): BetterCompute {
  return createClient({ baseUrl: s.apiUrl, apiKey: s.apiKey, fetch: keyGuardedFetch(s.apiUrl) });
}

/**
 * The API URL to offer at sign-in when the user has not chosen one: this origin with the base path
 * the server announces in /.well-known/better-compute (fetched without credentials), or "/api".
 */
export async function defaultApiUrl(): Promise<string> {
  try {
    const res = await fetch(new URL("/.well-known/better-compute", location.origin), {
      credentials: "omit",
      redirect: "error",
    });
    if (res.ok) {
      const d = (await res.json()) as { basePath?: unknown };
      if (typeof d.basePath === "string" && d.basePath.startsWith("/")) {
        return normalizeApiUrl(location.origin + d.basePath);
      }
    }
  } catch {
    // Served from somewhere else than the API: fall through.
  }
  return location.origin + "/api";
}
