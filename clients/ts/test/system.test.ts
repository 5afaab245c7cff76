// Calls a live Better Compute server through the generated client. Start one with
//   go run ./cmd/better-compute dev --fresh --port 0
// and export BETTER_COMPUTE_URL=<the "API:" URL it prints>, then run `npm test`.
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";

import { Code, ConnectError, SystemService, createClient } from "../src/index.js";

const baseUrl = process.env.BETTER_COMPUTE_URL;
if (!baseUrl) {
  throw new Error(
    "BETTER_COMPUTE_URL is not set. These tests call a live server: start one with " +
      "`go run ./cmd/better-compute dev --fresh --port 0` and set BETTER_COMPUTE_URL to the " +
      "printed API URL, e.g. http://127.0.0.1:43123/api",
  );
}

describe("SystemService.Info", () => {
  for (const useBinaryFormat of [false, true]) {
    it(`answers with version and server time (${useBinaryFormat ? "binary" : "JSON"})`, async () => {
      const system = createClient(SystemService, { baseUrl, useBinaryFormat });
      const info = await system.info({});
      expect(info.version).not.toBe("");
      expect(info.serverTime).toBeDefined();
      const skewMs = Math.abs(timestampDate(info.serverTime!).getTime() - Date.now());
      expect(skewMs).toBeLessThan(60_000);
    });
  }

  it("sends X-Better-Compute and the bearer API key", async () => {
    const seen: Headers[] = [];
    const recordingFetch: typeof fetch = (input, init) => {
      seen.push(new Headers(init?.headers));
      return fetch(input, init);
    };
    const anonymous = createClient(SystemService, { baseUrl, fetch: recordingFetch });
    await anonymous.info({});
    expect(seen[0].get("x-better-compute")).toBe("1");
    expect(seen[0].has("authorization")).toBe(false);

    const keyed = createClient(SystemService, { baseUrl, fetch: recordingFetch, apiKey: "bc_example" });
    // Info is public; whatever the server makes of an unknown key, the headers must have been sent.
    await keyed.info({}).catch((err: unknown) => expect(err).toBeInstanceOf(ConnectError));
    expect(seen[1].get("x-better-compute")).toBe("1");
    expect(seen[1].get("authorization")).toBe("Bearer bc_example");
  });

  it("surfaces a wrong base URL path as a ConnectError", async () => {
    const system = createClient(SystemService, { baseUrl: `${baseUrl}/no-such-prefix` });
    const err = await system.info({}).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConnectError);
    expect(ConnectError.from(err).code).toBe(Code.Unimplemented);
  });
});
