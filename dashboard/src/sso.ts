// Sign-in through the identity provider: the tenant's OIDC methods (auth/loginMethods, public),
// the browser route that starts a method's sign-in, and the cookie session it leaves behind. The
// API sets that session as an HttpOnly cookie of its own origin, so it serves the dashboard only
// when the API is this page's origin.
import { AuthService, Code, ConnectError, createClient, type authv1, type BetterCompute, type iamv1 } from "@better-compute/client";

// The SDK does not export the auth service yet: its generated descriptor, from the SDK's source.
import { clientFor, keyGuardedFetch, type CookieSession } from "./session.js";

const TENANT_KEY = "better-compute.sso-tenant";

/** The tenant whose methods the sign-in form offers when the user has not chosen one. */
export const DEFAULT_TENANT = "root";

/** The tenant the user last signed in to (remembered across tabs), or DEFAULT_TENANT. */
export function rememberedTenant(): string {
  try {
    return localStorage.getItem(TENANT_KEY) || DEFAULT_TENANT;
  } catch {
    return DEFAULT_TENANT;
  }
}

export function rememberTenant(tenant: string): void {
  try {
    localStorage.setItem(TENANT_KEY, tenant);
  } catch {
    // Storage refused (private mode): the default next time.
  }
}

/** Whether the API at apiUrl can hold this page's cookie session: it is this page's origin. */
export const cookieCapable = (apiUrl: string): boolean => new URL(apiUrl).origin === location.origin;

/** The OIDC methods the tenant's people may sign in with; none for an unknown tenant. */
export async function loginMethods(apiUrl: string, tenant: string): Promise<authv1.LoginMethod[]> {
  const auth = createClient(AuthService, { baseUrl: apiUrl, fetch: keyGuardedFetch(apiUrl) });
  return (await auth.listLoginMethods({ tenant })).methods;
}

/**
 * Starts a method's sign-in from this page: POST {api}/auth/login with X-Better-Compute (which
 * another site's page cannot send, so no other page can start a sign-in in this browser) and
 * the form fields tenant, method and return. The API sets its login cookie and answers the
 * provider's authorization URL, where the caller sends the browser; the provider returns it to
 * the API, which sets the session cookie and returns to returnTo (a path and hash of this page).
 * A refusal (a 429 when too many sign-ins are under way, an identity provider that does not
 * answer, a browser already signed in) is thrown with the API's message.
 */
export async function startLogin(apiUrl: string, tenant: string, method: string, returnTo: string): Promise<string> {
  const res = await fetch(`${apiUrl}/auth/login`, {
    method: "POST",
    headers: { "X-Better-Compute": "1", "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ tenant, method, return: returnTo }),
    credentials: "same-origin",
    redirect: "error",
    cache: "no-store",
  });
  if (!res.ok) {
    const text = (await res.text()).trim().replace(/^Sign-in failed: /, "");
    const retry = res.headers.get("Retry-After");
    throw new Error(retry ? `${text} (retry in ${retry} s)` : text || `the sign-in did not start (HTTP ${res.status})`);
  }
  const { authorizationUrl } = (await res.json()) as { authorizationUrl?: string };
  if (!authorizationUrl) throw new Error("the API answered no identity provider to go to");
  return authorizationUrl;
}

/** Where the sign-in should land: this page, its path and hash. */
export const currentPath = (): string => location.pathname + location.hash;

/**
 * The cookie session at apiUrl, if the browser holds one the API accepts: the client and who it
 * is. null when there is none (or the API is another origin); other failures are thrown.
 */
export async function resumeCookieSession(
  apiUrl: string,
): Promise<{ session: CookieSession; bc: BetterCompute; me: iamv1.WhoAmIResponse } | null> {
  if (!cookieCapable(apiUrl)) return null;
  const session: CookieSession = { apiUrl, cookie: true };
  const bc = clientFor(session);
  try {
    return { session, bc, me: await bc.iam.whoAmI({}) };
  } catch (err) {
    if (ConnectError.from(err).code === Code.Unauthenticated) return null;
    throw err;
  }
}

/** Ends the cookie session at the API (auth/signOut); the cookie is then worthless. */
export async function signOutCookie(session: CookieSession): Promise<void> {
  const auth = createClient(AuthService, { baseUrl: session.apiUrl, fetch: keyGuardedFetch(session.apiUrl, undefined, "same-origin") });
  await auth.signOut({});
}
