// The SDK against a live server (scripts/test starts `better-compute dev` and exports
// BETTER_COMPUTE_URL and BETTER_COMPUTE_API_KEY, the admin key it prints).
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";

import {
  Code,
  ConnectError,
  createClient,
  daemonv1,
  fieldViolations,
  iamv1,
  IamService,
  paginate,
} from "../src/index.js";

const baseUrl = process.env.BETTER_COMPUTE_URL ?? "";
const apiKey = process.env.BETTER_COMPUTE_API_KEY ?? "";
if (!baseUrl || !apiKey) {
  throw new Error(
    "BETTER_COMPUTE_URL and BETTER_COMPUTE_API_KEY must be set: start a server with " +
      "`go run ./cmd/better-compute dev --fresh --port 0` and use the printed API URL and API key",
  );
}

async function rejection(p: Promise<unknown>): Promise<ConnectError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConnectError);
  return err as ConnectError;
}

describe("createClient", () => {
  it("calls a method that needs the key", async () => {
    const bc = createClient({ baseUrl, apiKey });
    const me = await bc.iam.whoAmI({});
    expect(me.principal?.name).toBe("dev-admin");
    expect(me.roles).toContain(iamv1.Role.OWNER);
    const { nodes } = await bc.nodes.list({});
    expect(Array.isArray(nodes)).toBe(true);
  });

  it("surfaces a missing or wrong key as ConnectError with Code.Unauthenticated", async () => {
    for (const key of [undefined, "bck_nope_nope"]) {
      const iam = createClient(IamService, { baseUrl, apiKey: key });
      const err = await rejection(iam.whoAmI({}));
      expect(err.code).toBe(Code.Unauthenticated);
    }
  });

  it("surfaces an unknown id as Code.NotFound", async () => {
    const bc = createClient({ baseUrl, apiKey, useBinaryFormat: true });
    const err = await rejection(bc.nodes.get({ id: "00000000-0000-0000-0000-000000000000" }));
    expect(err.code).toBe(Code.NotFound);
  });

  it("names the bad field of an invalid request", async () => {
    for (const useBinaryFormat of [false, true]) {
      const bc = createClient({ baseUrl, apiKey, useBinaryFormat });
      const err = await rejection(bc.nodes.get({ id: "not-a-uuid" }));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(fieldViolations(err)).toEqual([
        { field: "id", description: 'must be a UUID, got "not-a-uuid"' },
      ]);
    }
    expect(fieldViolations(new Error("not a call"))).toEqual([]);
  });

  it("creates typed commands and names the bad field of one", async () => {
    for (const useBinaryFormat of [false, true]) {
      const bc = createClient({ baseUrl, apiKey, useBinaryFormat });
      const nodeId = "00000000-0000-0000-0000-000000000000";
      let err = await rejection(bc.commands.create({ nodeId }));
      expect(err.code).toBe(Code.InvalidArgument);
      expect(fieldViolations(err).map((v) => v.field)).toEqual(["payload"]);
      err = await rejection(
        bc.commands.create({ nodeId, payload: { case: "exec", value: { path: "nvidia-smi" } } }),
      );
      expect(err.code).toBe(Code.InvalidArgument);
      expect(fieldViolations(err).map((v) => v.field)).toEqual(["exec.path"]);
      // A valid command for a node that does not exist.
      const exec = create(daemonv1.ExecPayloadSchema, { path: "/usr/bin/nvidia-smi", args: ["-L"] });
      err = await rejection(bc.commands.create({ nodeId, payload: { case: "exec", value: exec } }));
      expect(err.code).toBe(Code.NotFound);
    }
  });

  it("pages through principals", async () => {
    const bc = createClient({ baseUrl, apiKey });
    const prefix = `ts-page-${Date.now().toString(36)}`;
    const want = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const { principal } = await bc.iam.createPrincipal({
        kind: iamv1.PrincipalKind.SERVICE_ACCOUNT,
        name: `${prefix}-${i}`,
      });
      want.add(principal!.id);
    }
    let pages = 0;
    const seen: string[] = [];
    for await (const p of paginate(
      (pageToken) => {
        pages++;
        return bc.iam.listPrincipals({ pageSize: 2, pageToken });
      },
      (res) => res.principals,
    )) {
      seen.push(p.id);
    }
    expect(new Set(seen).size).toBe(seen.length); // no principal twice
    for (const id of want) expect(seen).toContain(id);
    expect(pages).toBeGreaterThanOrEqual(3);
  });
});
