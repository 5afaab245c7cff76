// The "Tunnels" example of README.md. `npm run typecheck` compiles it; test/tunnel.test.ts runs
// it against a fake of the API's tunnel endpoint and checks that the README shows its body as it
// is here.
import type { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";

import type { BetterCompute } from "../src/index.js";
import { openTunnel, TunnelAbortError } from "../src/tunnel.js";

/** Opens a tunnel to port 22 of node nodeId and copies bytes: input to the node's sshd, its answer to output. */
export async function copyThroughTunnel(bc: BetterCompute, nodeId: string, input: Readable, output: Writable): Promise<void> {
  const tunnel = await openTunnel(bc, nodeId, 22);
  console.log("tunnel", tunnel.tunnel?.id, "open");
  try {
    // The end of input half-closes the tunnel; the node's answer keeps coming until its end closes.
    await Promise.all([pipeline(input, tunnel), pipeline(tunnel, output)]);
  } catch (err) {
    // An abort says why, for example 4005: nothing listens on the port on the node.
    if (err instanceof TunnelAbortError) console.error("tunnel aborted:", err.code, err.reason);
    throw err;
  }
}
