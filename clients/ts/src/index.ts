// Public entry point of @better-compute/client: the generated service descriptors and messages,
// plus createClient, which builds a Connect client that works in browsers and on Node 20+ (fetch).
import type { DescService } from "@bufbuild/protobuf";
import {
  createClient as createConnectClient,
  type Client,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

export * from "./gen/bettercompute/system/v1/system_pb.js";
export { Code, ConnectError } from "@connectrpc/connect";
export type { Client, Interceptor, Transport } from "@connectrpc/connect";

/** Header sent on every request so the server can tell API clients from plain browser navigation. */
export const CLIENT_HEADER = "X-Better-Compute";

export interface ClientOptions {
  /** API base URL including the path prefix, for example "https://compute.example.com/api". */
  baseUrl: string;
  /** API key; when set, every request carries "Authorization: Bearer <apiKey>". */
  apiKey?: string;
  /** fetch implementation to use; defaults to globalThis.fetch. */
  fetch?: typeof globalThis.fetch;
  /** Use the binary protobuf encoding instead of JSON (default false: JSON). */
  useBinaryFormat?: boolean;
  /** Timeout applied to calls that set none, in milliseconds. */
  defaultTimeoutMs?: number;
  /** Extra interceptors, run after the one that sets the Better Compute headers. */
  interceptors?: Interceptor[];
}

/** Interceptor that sets X-Better-Compute: 1 and, with an API key, the bearer Authorization header. */
export function headersInterceptor(apiKey?: string): Interceptor {
  return (next) => async (req) => {
    req.header.set(CLIENT_HEADER, "1");
    if (apiKey) {
      req.header.set("Authorization", `Bearer ${apiKey}`);
    }
    return next(req);
  };
}

/** Creates a Connect-protocol transport for the Better Compute API. */
export function createTransport(options: ClientOptions): Transport {
  return createConnectTransport({
    baseUrl: options.baseUrl,
    useBinaryFormat: options.useBinaryFormat ?? false,
    defaultTimeoutMs: options.defaultTimeoutMs,
    // Bind so a default fetch is never called with a foreign `this` (browsers reject that).
    fetch: options.fetch ?? ((input, init) => globalThis.fetch(input, init)),
    interceptors: [headersInterceptor(options.apiKey), ...(options.interceptors ?? [])],
  });
}

/**
 * Creates a client for one service, for example:
 *
 *   const system = createClient(SystemService, { baseUrl: "http://127.0.0.1:8080/api" });
 *   const info = await system.info({});
 */
export function createClient<T extends DescService>(service: T, options: ClientOptions): Client<T> {
  return createConnectClient(service, createTransport(options));
}
