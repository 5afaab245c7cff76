// The README's "Rolling workflows" example (examples/rolling-upgrade.ts), run against canned
// answers: no server is needed, the calls never leave the client.
import { create, type Message } from "@bufbuild/protobuf";
import { readFile } from "node:fs/promises";
import { afterEach, describe, expect, it, vi } from "vitest";

import { rollingUpgrade } from "../examples/rolling-upgrade.js";
import { type BetterCompute, createClient, durationMs, type Interceptor, workflowsv1 } from "../src/index.js";

interface Call {
  method: string;
  message: Message;
}

/**
 * A client whose calls are recorded in calls and answered from answers, by method: each call
 * takes the next answer, the last one repeating (an empty response for a method without any).
 */
function cannedClient(answers: Record<string, Message[]>): { bc: BetterCompute; calls: Call[] } {
  const calls: Call[] = [];
  const canned: Interceptor = () => async (req) => {
    if (req.stream) throw new Error(`${req.method.name} streams`);
    calls.push({ method: req.method.localName, message: req.message });
    const queue = answers[req.method.localName] ?? [];
    const message = (queue.length > 1 ? queue.shift() : queue[0]) ?? create(req.method.output);
    return { stream: false, service: req.service, method: req.method, header: new Headers(), trailer: new Headers(), message };
  };
  const bc = createClient({ baseUrl: "http://canned.invalid/api", apiKey: "bck_canned", interceptors: [canned] });
  return { bc, calls };
}

/** A workflows.get answer for workflow w1 of 4 nodes; gpu-2 failed when failed > 0. */
function got(state: string, succeeded: number, inProgress: number, failed: number): workflowsv1.GetResponse {
  return create(workflowsv1.GetResponseSchema, {
    workflow: {
      id: "w1",
      state,
      reason: failed > 0 ? "1 node failed" : "",
      counts: { total: 4, succeeded, inProgress, failed, pending: 4 - succeeded - inProgress - failed },
    },
    nodes: [
      { nodeId: "n1", hostname: "gpu-1", step: succeeded > 0 ? "succeeded" : "act" },
      { nodeId: "n2", hostname: "gpu-2", step: failed > 0 ? "failed" : "pending", message: failed > 0 ? "rolled back" : "" },
    ],
  });
}

function logged(): string[] {
  return vi.mocked(console.log).mock.calls.map((args) => args.map(String).join(" "));
}

describe("the rolling upgrade example", () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it("is what the README shows", async () => {
    const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
    const example = await readFile(new URL("../examples/rolling-upgrade.ts", import.meta.url), "utf8");
    const section = (readme.split("\n## Rolling workflows\n")[1] ?? "").split("\n## ")[0];
    const blocks = [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    expect(blocks).toHaveLength(1);
    const indented = blocks[0].replace(/^(?=.)/gm, "  ");
    expect(example, "README.md shows code that is not in examples/rolling-upgrade.ts").toContain(indented);
  });

  it("creates the workflow, follows it and retries the failed nodes once", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    const { bc, calls } = cannedClient({
      create: [create(workflowsv1.CreateResponseSchema, { workflow: { id: "w1", state: "running" } })],
      get: [got("running", 0, 2, 0), got("running", 0, 2, 0), got("paused", 1, 0, 1), got("running", 1, 1, 0), got("succeeded", 4, 0, 0)],
    });
    const w = await rollingUpgrade(bc, "1.4.0", 0);
    expect(w.state).toBe("succeeded");
    expect(calls.map((c) => c.method)).toEqual(["create", "get", "get", "get", "resume", "get", "get"]);
    const req = calls[0].message as workflowsv1.CreateRequest;
    expect(req).toMatchObject({
      action: { kind: { case: "upgrade", value: { version: "1.4.0" } } },
      target: { labelSelector: { role: "gpu" } },
      policy: { maxParallel: 2 },
    });
    expect(durationMs(req.policy!.minHealthy!)).toBe(30_000);
    expect(calls[4].message).toMatchObject({ id: "w1", retryFailed: true });
    expect(logged()).toEqual([
      "running: 0/4 upgraded, 2 in progress, 0 failed",
      "paused: 1/4 upgraded, 0 in progress, 1 failed",
      "gpu-2 failed: rolled back",
      "running: 1/4 upgraded, 1 in progress, 0 failed",
      "succeeded: 4/4 upgraded, 0 in progress, 0 failed",
    ]);
  });

  it("gives up when it pauses again", async () => {
    vi.spyOn(console, "log").mockImplementation(() => {});
    const { bc, calls } = cannedClient({
      create: [create(workflowsv1.CreateResponseSchema, { workflow: { id: "w1", state: "running" } })],
      get: [got("paused", 1, 0, 1)],
    });
    await expect(rollingUpgrade(bc, "1.4.0", 0)).rejects.toThrow("paused again: 1 node failed");
    expect(calls.map((c) => c.method)).toEqual(["create", "get", "resume", "get"]);
  });
});
