// The signed-in session: which API the user chose and how calls authenticate there. A key session
// keeps the API URL and the key the user gave in sessionStorage (gone with the tab); a cookie
// session (signed in through the identity provider) keeps nothing here: the API holds it in an
// HttpOnly cookie of its origin, which must be this page's. Either way every request passes
// through keyGuardedFetch, which refuses any other origin or path.
import { createClient, type BetterCompute } from "@better-compute/client";

const STORAGE_KEY = "better-compute.session";

/** A session authenticated by an API key the user pasted. */
export interface KeySession {
  /** The API base URL, for example "https://compute.example.com/api" (no trailing slash). */
  apiUrl: string;
  apiKey: string;
}

/**
 * A session signed in through the identity provider: the API's HttpOnly session cookie, which the
 * browser sends with same-origin calls that carry X-Better-Compute (the API's CSRF guard).
 */
export interface CookieSession {
  apiUrl: string;
  cookie: true;
}

export type Session = KeySession | CookieSession;

/** Whether the session authenticates with an API key (false: the session cookie). */
export const isKeySession = (s: Session): s is KeySession => "apiKey" in s;

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

export function loadSession(): KeySession | null {
  try {
    const s = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? "null") as Partial<KeySession> | null;
    if (!s || typeof s.apiUrl !== "string" || typeof s.apiKey !== "string" || !s.apiKey) return null;
    return { apiUrl: normalizeApiUrl(s.apiUrl), apiKey: s.apiKey };
  } catch {
    return null;
  }
}

export function saveSession(s: KeySession): void {
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(s));
}

export function clearSession(): void {
  sessionStorage.removeItem(STORAGE_KEY);
}

/**
 * A fetch that only reaches the configured API: the same origin as apiUrl and a path below it.
 * Anything else is refused before a byte is sent. It never follows a redirect (which could carry
 * the request elsewhere) and sends no Referer; it sends no cookies unless credentials says so
 * ("same-origin" for a cookie session).
 */
export function keyGuardedFetch(
  apiUrl: string,
  next: typeof fetch = (i, init) => fetch(i, init),
  credentials: RequestCredentials = "omit",
): typeof fetch {
  const api = new URL(apiUrl);
  const prefix = api.pathname.replace(/\/+$/, "") + "/";
  return (input, init) => {
    const target = new URL(input instanceof Request ? input.url : String(input), location.href);
    if (target.origin !== api.origin || !target.pathname.startsWith(prefix)) {
      return Promise.reject(new KeyRefusedError(target.origin));
    }
    return next(input, {
      ...init,
      credentials,
      redirect: "error",
      referrerPolicy: "no-referrer",
      cache: "no-store",
    });
  };
}

/**
 * The SDK's clients for a session, every request going through keyGuardedFetch: with the key, or
 * with no Authorization header and the same-origin session cookie.
 */
export function clientFor(s: Session): BetterCompute {
  if (isKeySession(s)) return createClient({ baseUrl: s.apiUrl, apiKey: s.apiKey, fetch: keyGuardedFetch(s.apiUrl) });
  return createClient({ baseUrl: s.apiUrl, fetch: keyGuardedFetch(s.apiUrl, undefined, "same-origin") });
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
