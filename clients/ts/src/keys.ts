// The API key each client of createClient was made with, for the Node tunnel helper
// (./tunnel.ts), which must send it on the WebSocket it opens itself. Kept here, out of sight,
// rather than as a property of the client, so that logging or serialising a client never shows
// the key.
const keys = new WeakMap<object, string>();

/** Remembers the key a client was created with. */
export function rememberApiKey(client: object, apiKey: string | undefined): void {
  if (apiKey) keys.set(client, apiKey);
}

/** The key client was created with, if createClient made it with one. */
export function apiKeyOf(client: object): string | undefined {
  return keys.get(client);
}
