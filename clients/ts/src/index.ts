// Public entry point of @better-compute/client: the generated service descriptors and messages,
// plus createClient, which builds a Connect client that works in browsers and on Node 20+ (fetch).
import type { DescService } from "@bufbuild/protobuf";
import {
  ConnectError,
  createClient as createConnectClient,
  type Client,
  type Interceptor,
  type Transport,
} from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

import { AuditService } from "./gen/bettercompute/audit/v1/audit_pb.js";
import { AuthService } from "./gen/bettercompute/auth/v1/auth_pb.js";
import { CommandsService } from "./gen/bettercompute/commands/v1/commands_pb.js";
import { EventsService } from "./gen/bettercompute/events/v1/events_pb.js";
import { GpusService } from "./gen/bettercompute/gpus/v1/gpus_pb.js";
import { RemediationsService } from "./gen/bettercompute/remediations/v1/remediations_pb.js";
import { IamService } from "./gen/bettercompute/iam/v1/iam_pb.js";
import { JoinTokensService } from "./gen/bettercompute/jointokens/v1/jointokens_pb.js";
import { LeasesService } from "./gen/bettercompute/leases/v1/leases_pb.js";
import { NodesService } from "./gen/bettercompute/nodes/v1/nodes_pb.js";
import { PoolsService } from "./gen/bettercompute/pools/v1/pools_pb.js";
import { ReservationsService } from "./gen/bettercompute/reservations/v1/reservations_pb.js";
import { SystemService } from "./gen/bettercompute/system/v1/system_pb.js";
import { TunnelsService } from "./gen/bettercompute/tunnels/v1/tunnels_pb.js";
import { UsageService } from "./gen/bettercompute/usage/v1/usage_pb.js";
import { SecretsService } from "./gen/bettercompute/secrets/v1/secrets_pb.js";
import { WebhooksService } from "./gen/bettercompute/webhooks/v1/webhooks_pb.js";
import { WorkflowsService } from "./gen/bettercompute/workflows/v1/workflows_pb.js";
import { BadRequestSchema } from "./gen/google/rpc/error_details_pb.js";
import { rememberApiKey } from "./keys.js";

// Every API service by name. Their messages are in one namespace per package (nodesv1.Node,
// poolsv1.ListRequest, ...): message names repeat across packages. SystemService's messages are
// also exported at the top level, as they were first.
export {
  AuditService,
  AuthService,
  CommandsService,
  EventsService,
  GpusService,
  RemediationsService,
  IamService,
  JoinTokensService,
  LeasesService,
  NodesService,
  PoolsService,
  ReservationsService,
  SystemService,
  TunnelsService,
  UsageService,
  SecretsService,
  WebhooksService,
  WorkflowsService,
};
export * from "./gen/bettercompute/system/v1/system_pb.js";
export * as auditv1 from "./gen/bettercompute/audit/v1/audit_pb.js";
export * as authv1 from "./gen/bettercompute/auth/v1/auth_pb.js";
export * as commandsv1 from "./gen/bettercompute/commands/v1/commands_pb.js";
// The typed command payloads (ExecPayload, UpgradePayload, ...) commands/create takes.
export * as daemonv1 from "./gen/bettercompute/daemon/v1/commands_pb.js";
export * as eventsv1 from "./gen/bettercompute/events/v1/events_pb.js";
export * as gpusv1 from "./gen/bettercompute/gpus/v1/gpus_pb.js";
export * as remediationsv1 from "./gen/bettercompute/remediations/v1/remediations_pb.js";
export * as iamv1 from "./gen/bettercompute/iam/v1/iam_pb.js";
export * as jointokensv1 from "./gen/bettercompute/jointokens/v1/jointokens_pb.js";
export * as leasesv1 from "./gen/bettercompute/leases/v1/leases_pb.js";
export * as nodesv1 from "./gen/bettercompute/nodes/v1/nodes_pb.js";
export * as poolsv1 from "./gen/bettercompute/pools/v1/pools_pb.js";
export * as reservationsv1 from "./gen/bettercompute/reservations/v1/reservations_pb.js";
export * as systemv1 from "./gen/bettercompute/system/v1/system_pb.js";
// Tunnels: tunnels.create returns the ticket; @better-compute/client/tunnel opens it on Node.
export * as tunnelsv1 from "./gen/bettercompute/tunnels/v1/tunnels_pb.js";
export * as usagev1 from "./gen/bettercompute/usage/v1/usage_pb.js";
export * as secretsv1 from "./gen/bettercompute/secrets/v1/secrets_pb.js";
export * as webhooksv1 from "./gen/bettercompute/webhooks/v1/webhooks_pb.js";
export * as workflowsv1 from "./gen/bettercompute/workflows/v1/workflows_pb.js";
// google.rpc error details (BadRequest, ...), which @bufbuild/protobuf does not ship.
export * as rpc from "./gen/google/rpc/error_details_pb.js";
export { Code, ConnectError } from "@connectrpc/connect";
// Helpers for the well-known types that requests and responses carry.
export {
  durationFromMs,
  durationMs,
  timestampDate,
  timestampFromDate,
  timestampFromMs,
  timestampMs,
} from "@bufbuild/protobuf/wkt";
export type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
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

/** A client for every API service, sharing one transport. */
export interface BetterCompute {
  transport: Transport;
  system: Client<typeof SystemService>;
  iam: Client<typeof IamService>;
  auth: Client<typeof AuthService>;
  audit: Client<typeof AuditService>;
  events: Client<typeof EventsService>;
  webhooks: Client<typeof WebhooksService>;
  joinTokens: Client<typeof JoinTokensService>;
  nodes: Client<typeof NodesService>;
  gpus: Client<typeof GpusService>;
  remediations: Client<typeof RemediationsService>;
  commands: Client<typeof CommandsService>;
  pools: Client<typeof PoolsService>;
  leases: Client<typeof LeasesService>;
  reservations: Client<typeof ReservationsService>;
  usage: Client<typeof UsageService>;
  secrets: Client<typeof SecretsService>;
  tunnels: Client<typeof TunnelsService>;
  workflows: Client<typeof WorkflowsService>;
}

/**
 * Creates a client for every service, or, given a service first, for that one:
 *
 *   const bc = createClient({ baseUrl: "http://127.0.0.1:3000/api", apiKey });
 *   const { nodes } = await bc.nodes.list({});
 *   const system = createClient(SystemService, { baseUrl: "http://127.0.0.1:3000/api" });
 *
 * Failed calls reject with a ConnectError: err.code is Code.Unauthenticated for a missing or
 * wrong key, Code.NotFound for an unknown id, and so on; fieldViolations(err) lists the request
 * fields a Code.InvalidArgument error refused.
 */
export function createClient(options: ClientOptions): BetterCompute;
export function createClient<T extends DescService>(service: T, options: ClientOptions): Client<T>;
export function createClient<T extends DescService>(
  serviceOrOptions: T | ClientOptions,
  options?: ClientOptions,
): Client<T> | BetterCompute {
  if (options !== undefined) {
    return createConnectClient(serviceOrOptions as T, createTransport(options));
  }
  const transport = createTransport(serviceOrOptions as ClientOptions);
  const bc: BetterCompute = {
    transport,
    system: createConnectClient(SystemService, transport),
    iam: createConnectClient(IamService, transport),
    auth: createConnectClient(AuthService, transport),
    audit: createConnectClient(AuditService, transport),
    events: createConnectClient(EventsService, transport),
    webhooks: createConnectClient(WebhooksService, transport),
    joinTokens: createConnectClient(JoinTokensService, transport),
    nodes: createConnectClient(NodesService, transport),
    gpus: createConnectClient(GpusService, transport),
    remediations: createConnectClient(RemediationsService, transport),
    commands: createConnectClient(CommandsService, transport),
    pools: createConnectClient(PoolsService, transport),
    leases: createConnectClient(LeasesService, transport),
    reservations: createConnectClient(ReservationsService, transport),
    usage: createConnectClient(UsageService, transport),
    secrets: createConnectClient(SecretsService, transport),
    tunnels: createConnectClient(TunnelsService, transport),
    workflows: createConnectClient(WorkflowsService, transport),
  };
  rememberApiKey(bc, (serviceOrOptions as ClientOptions).apiKey);
  return bc;
}

/**
 * Iterates over every item of a paged list: calls `page` with each next page token until the
 * server returns an empty one.
 *
 *   for await (const p of paginate((pageToken) => bc.iam.listPrincipals({ pageToken }), (r) => r.principals)) {}
 */
export async function* paginate<R extends { nextPageToken: string }, T>(
  page: (pageToken: string) => Promise<R>,
  items: (response: R) => T[],
): AsyncGenerator<T, void, undefined> {
  let token = "";
  do {
    const res = await page(token);
    yield* items(res);
    token = res.nextPageToken;
  } while (token !== "");
}

/** One request field the API refused: a google.rpc.BadRequest field violation. */
export interface FieldViolation {
  /**
   * The field's path: proto field names joined by dots, with [i] for a list item and ["key"] for
   * a map entry, for example "pool_id" or "tolerations[0].operator". A request header is named
   * "<Header-Name> header".
   */
  field: string;
  /** What is wrong with the field, for example `must be a UUID, got "x"`. */
  description: string;
}

/**
 * Returns the bad request fields a failed call names, in the order the API reported them
 * (several when it checked several fields), from the google.rpc.BadRequest detail it attaches to
 * Code.InvalidArgument errors and to Code.FailedPrecondition errors caused by one field. Empty
 * when err is not a ConnectError or has no such detail.
 *
 *   try {
 *     await bc.nodes.get({ id: "x" });
 *   } catch (err) {
 *     for (const v of fieldViolations(err)) console.log(v.field, v.description); // id must be a UUID…
 *   }
 */
export function fieldViolations(err: unknown): FieldViolation[] {
  if (!(err instanceof ConnectError)) {
    return [];
  }
  return err
    .findDetails(BadRequestSchema)
    .flatMap((br) =>
      br.fieldViolations.map((v) => ({ field: v.field, description: v.description })),
    );
}
