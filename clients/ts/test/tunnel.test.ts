// The Node tunnel helper (src/tunnel.ts): its frames against the Go code's
// (client/testdata/tunnel_frames.json, written by client/tunnel_test.go), and the whole helper
// against a fake of the API's tunnel endpoint: a WebSocket server written here, apart from the
// helper's own WebSocket code, that checks the key, the subprotocol and the masking, and plays
// the node's end of the tunnel. No server of the project is needed.
import { create } from "@bufbuild/protobuf";
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { PassThrough, Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";

import * as example from "../examples/tunnel.js";
import { createClient, type Interceptor, tunnelsv1 } from "../src/index.js";
import {
  abortPayload,
  CLOSE_CODES,
  connectTunnel,
  encodeMessage,
  FrameType,
  MAX_PAYLOAD,
  openTunnel,
  parseAbort,
  parseMessage,
  REFUSALS,
  SUBPROTOCOL,
  TunnelAbortError,
  TunnelRefusedError,
  type TunnelSocket,
} from "../src/tunnel.js";

interface Vectors {
  subprotocol: string;
  max_payload: number;
  messages: {
    name: string;
    type: number;
    payload?: string;
    code?: number;
    reason?: string;
    parsed_reason?: string;
    parsed_code?: number;
    parse_only?: boolean;
    message: string;
  }[];
  invalid_messages: string[];
  codes: { code: number; description: string }[];
  refusals: { status: number; reason: string }[];
}

const vectors = JSON.parse(
  await readFile(new URL("../../../client/testdata/tunnel_frames.json", import.meta.url), "utf8"),
) as Vectors;
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const unhex = (s: string) => new Uint8Array(Buffer.from(s, "hex"));

describe("tunnel frames are the Go code's", () => {
  it("has the same constants, close codes and refusals", () => {
    expect(SUBPROTOCOL).toBe(vectors.subprotocol);
    expect(MAX_PAYLOAD).toBe(vectors.max_payload);
    expect(CLOSE_CODES).toEqual(Object.fromEntries(vectors.codes.map((c) => [c.code, c.description])));
    expect(REFUSALS).toEqual(Object.fromEntries(vectors.refusals.map((r) => [r.status, r.reason])));
  });

  for (const v of vectors.messages) {
    it(`encodes and parses ${v.name}`, () => {
      const msg = unhex(v.message);
      const f = parseMessage(msg);
      expect(f.type).toBe(v.type);
      if (v.type === FrameType.ABORT) {
        expect(parseAbort(f.payload)).toEqual({ code: v.parsed_code ?? v.code, reason: v.parsed_reason ?? "" });
        if (!v.parse_only) {
          expect(hex(encodeMessage({ type: FrameType.ABORT, payload: abortPayload(v.code!, v.reason ?? "") }))).toBe(v.message);
        }
      } else {
        expect(hex(f.payload)).toBe(v.payload ?? "");
        expect(hex(encodeMessage({ type: v.type as FrameType, payload: unhex(v.payload ?? "") }))).toBe(v.message);
      }
    });
  }

  it("refuses malformed messages", () => {
    for (const m of [...vectors.invalid_messages, "00" + "ab".repeat(MAX_PAYLOAD + 1)]) {
      expect(() => parseMessage(unhex(m)), m.slice(0, 10)).toThrow(TunnelAbortError);
    }
    expect(() => parseMessage(unhex("00" + "ab".repeat(MAX_PAYLOAD)))).not.toThrow();
  });
});

// ---- The fake API: an HTTP server upgrading GET /api/tunnels/{ticket}. ----

const KEY = "bck_tunnel_test";
const TRAILER = "\n-- the node's last bytes --\n";

interface WsFrame {
  fin: boolean;
  opcode: number;
  payload: Buffer;
}

/** The server's end of one WebSocket: reads the client's (masked) frames, writes unmasked ones. */
class Peer {
  readonly #frames: WsFrame[] = [];
  readonly #waiters: ((f: WsFrame | undefined) => void)[] = [];
  #buf = Buffer.alloc(0);
  #ended = false;
  unmasked = 0; // client frames without a mask: a protocol violation
  dataSizes: number[] = []; // payload sizes of the client's data messages

  constructor(
    readonly socket: Socket,
    head: Buffer,
  ) {
    socket.on("data", (b: Buffer) => this.#onData(b));
    if (head.length > 0) this.#onData(head);
    socket.on("close", () => {
      this.#ended = true;
      for (const w of this.#waiters.splice(0)) w(undefined);
    });
    socket.on("error", () => {});
  }

  #onData(b: Buffer): void {
    this.#buf = Buffer.concat([this.#buf, b]);
    for (;;) {
      const b = this.#buf;
      if (b.length < 2) return;
      let len = b[1] & 0x7f;
      let off = 2;
      if (len === 126) {
        if (b.length < 4) return;
        len = b.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (b.length < 10) return;
        len = Number(b.readBigUInt64BE(2));
        off = 10;
      }
      const masked = (b[1] & 0x80) !== 0;
      if (!masked) this.unmasked++;
      const keyAt = off;
      if (masked) off += 4;
      if (b.length < off + len) return;
      const payload = Buffer.from(b.subarray(off, off + len));
      if (masked) for (let i = 0; i < len; i++) payload[i] ^= b[keyAt + (i % 4)];
      this.#buf = b.subarray(off + len);
      const f = { fin: (b[0] & 0x80) !== 0, opcode: b[0] & 0x0f, payload };
      if (f.opcode === 0x2 && payload[0] === 0) this.dataSizes.push(len - 1);
      const w = this.#waiters.shift();
      if (w) w(f);
      else this.#frames.push(f);
    }
  }

  /** The client's next frame; undefined once the connection closed. */
  next(): Promise<WsFrame | undefined> {
    const f = this.#frames.shift();
    if (f || this.#ended) return Promise.resolve(f);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Writes a frame, unmasked, as a server does; fin false for a fragment. */
  send(opcode: number, payload: Uint8Array, fin = true): void {
    const n = payload.length;
    const head = n < 126 ? Buffer.from([0, n]) : n < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
    head[0] = (fin ? 0x80 : 0) | opcode;
    if (n >= 126 && n < 65536) {
      head[1] = 126;
      head.writeUInt16BE(n, 2);
    } else if (n >= 65536) {
      head[1] = 127;
      head.writeBigUInt64BE(BigInt(n), 2);
    }
    this.socket.write(Buffer.concat([head, payload]));
  }

  sendFrame(type: number, payload: Uint8Array = new Uint8Array(0)): void {
    this.send(0x2, Buffer.concat([Buffer.from([type]), payload]));
  }

  /** Sends a close frame with code and reason, and waits for the client's, which it returns. */
  async close(code: number, reason = ""): Promise<number | undefined> {
    const p = Buffer.alloc(2);
    p.writeUInt16BE(code);
    this.send(0x8, Buffer.concat([p, Buffer.from(reason)]));
    for (;;) {
      const f = await this.next();
      if (!f) return undefined;
      if (f.opcode === 0x8) {
        this.socket.end();
        return f.payload.length >= 2 ? f.payload.readUInt16BE(0) : 1005;
      }
    }
  }

  /** Reads until the client closes; returns its close code (or 0 after an abort frame, its code). */
  async drain(): Promise<number | undefined> {
    for (;;) {
      const f = await this.next();
      if (!f) return undefined;
      if (f.opcode === 0x2 && f.payload[0] === 2) return f.payload.readUInt16BE(1);
      if (f.opcode === 0x8) {
        this.send(0x8, f.payload);
        this.socket.end();
        return f.payload.readUInt16BE(0);
      }
    }
  }
}

type Behaviour = (peer: Peer) => Promise<unknown>;

/** The echo of the Go fake (client/tunneltest): every data frame back; after the client's close-write, the trailer, a close-write, and a normal close. */
async function echo(peer: Peer): Promise<string> {
  for (;;) {
    const f = await peer.next();
    if (!f) return "the client went away";
    if (f.opcode === 0x9) continue;
    if (f.opcode !== 0x2) return `opcode ${f.opcode}`;
    const type = f.payload[0];
    if (type === FrameType.DATA) {
      peer.send(0x2, f.payload);
    } else if (type === FrameType.CLOSE_WRITE) {
      peer.sendFrame(FrameType.DATA, Buffer.from(TRAILER));
      peer.sendFrame(FrameType.CLOSE_WRITE);
      const code = await peer.close(1000);
      return code === 1000 ? "ok" : `the client closed with ${code}`;
    } else {
      return `frame type ${type}`;
    }
  }
}

let server: Server;
let base = "";
const behaviours = new Map<string, Behaviour>();
const results = new Map<string, Promise<unknown>>();
const upgrades: IncomingMessage[] = [];

/** A ticket URL whose tunnel runs behaviour; its result is results.get(ticket). */
function ticket(name: string, behaviour: Behaviour): string {
  behaviours.set(name, behaviour);
  return `${base}/api/tunnels/${name}`;
}

beforeAll(async () => {
  server = createServer((_req, res) => {
    res.writeHead(426).end("upgrade required\n");
  });
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) => {
    const refuse = (status: number, reason: string) => {
      const body = reason ? `${reason}\n` : "";
      socket.end(
        `HTTP/1.1 ${status} Refused\r\nContent-Type: text/plain; charset=utf-8\r\n` +
          `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
    };
    const name = req.url?.replace("/api/tunnels/", "") ?? "";
    const refusal = /^refuse-(\d+)(-quietly)?$/.exec(name);
    const protocols = (req.headers["sec-websocket-protocol"] ?? "").split(",").map((s) => s.trim());
    if (req.headers.authorization !== `Bearer ${KEY}`) return refuse(401, "an API key is required");
    if (refusal) return refuse(Number(refusal[1]), refusal[2] ? "" : `${REFUSALS[Number(refusal[1])] ?? "refused"}: by the test`);
    if (!protocols.includes(SUBPROTOCOL)) return refuse(426, "no subprotocol");
    const behaviour = behaviours.get(name);
    if (!behaviour) return refuse(404, "no such ticket");
    behaviours.delete(name); // single use
    upgrades.push(req);
    const accept = createHash("sha1")
      .update(`${req.headers["sec-websocket-key"]}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`)
      .digest("base64");
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
        `Sec-WebSocket-Accept: ${accept}\r\nSec-WebSocket-Protocol: ${SUBPROTOCOL}\r\n\r\n`,
    );
    const peer = new Peer(socket, head);
    results.set(name, behaviour(peer).then((r) => (peer.unmasked > 0 ? `${peer.unmasked} unmasked frames` : r)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `ws://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Reads a stream to its end. */
async function readAll(s: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of s) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Waits for a stream's 'close', returning the error it was destroyed with. */
function closed(s: TunnelSocket): Promise<Error | undefined> {
  return new Promise((resolve) => {
    let error: Error | undefined;
    s.on("error", (e) => (error = e));
    s.on("close", () => resolve(error));
  });
}

describe("a tunnel", () => {
  it("carries bytes both ways in frames of at most 64 KiB, and half-closes", async () => {
    let sizes: number[] = [];
    const url = ticket("echo", async (peer) => {
      const r = await echo(peer);
      sizes = peer.dataSizes;
      return r;
    });
    const t = await connectTunnel(url, { apiKey: KEY });
    const ended = closed(t);
    const data = Buffer.alloc(1024 * 1024 + 3);
    for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 9)) & 0xff;
    t.end(data);
    const got = await readAll(t);
    expect(got.length).toBe(data.length + TRAILER.length);
    expect(got.equals(Buffer.concat([data, Buffer.from(TRAILER)]))).toBe(true);
    expect(await results.get("echo")).toBe("ok");
    expect(Math.max(...sizes)).toBe(MAX_PAYLOAD);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(data.length);
    expect(await ended).toBeUndefined();
    const req = upgrades.at(-1)!;
    expect(req.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req.headers["x-better-compute"]).toBe("1");
  });

  it("answers pings and reassembles fragmented messages", async () => {
    const url = ticket("ping", async (peer) => {
      peer.send(0x9, Buffer.from("p1"));
      const pong = await peer.next();
      if (pong?.opcode !== 0xa || pong.payload.toString() !== "p1") return `no pong: ${pong?.opcode}`;
      const msg = Buffer.concat([Buffer.from([FrameType.DATA]), Buffer.from("fragmented hello")]);
      peer.send(0x2, msg.subarray(0, 3), false);
      peer.send(0x9, Buffer.from("p2")); // a control frame between fragments
      peer.send(0x0, msg.subarray(3, 9), false);
      peer.send(0x0, msg.subarray(9), true);
      const pong2 = await peer.next();
      if (pong2?.opcode !== 0xa || pong2.payload.toString() !== "p2") return `no pong: ${pong2?.opcode}`;
      return echo(peer);
    });
    const t = await connectTunnel(url, { apiKey: KEY });
    const reader = t[Symbol.asyncIterator]();
    expect(String((await reader.next()).value)).toBe("fragmented hello");
    t.end("bye");
    const rest: Buffer[] = [];
    for (let r = await reader.next(); !r.done; r = await reader.next()) rest.push(r.value as Buffer);
    expect(Buffer.concat(rest).toString()).toBe(`bye${TRAILER}`);
    expect(await results.get("ping")).toBe("ok");
  });

  for (const [name, behaviour] of Object.entries({
    "an-abort-frame": async (peer: Peer) => {
      await peer.next();
      peer.sendFrame(FrameType.ABORT, abortPayload(4005, "dial tcp 127.0.0.1:22: connection refused"));
      return peer.close(4005, "dial tcp 127.0.0.1:22: connection refused");
    },
    "a-close-code": async (peer: Peer) => {
      await peer.next();
      return peer.close(4005, "dial tcp 127.0.0.1:22: connection refused");
    },
  })) {
    it(`ends with a TunnelAbortError on ${name}`, async () => {
      const url = ticket(name, behaviour);
      const t = await connectTunnel(url, { apiKey: KEY });
      const ended = closed(t);
      t.write("SSH-2.0-test\r\n");
      const err = await ended;
      expect(err).toBeInstanceOf(TunnelAbortError);
      expect(err).toMatchObject({ code: 4005, reason: "dial tcp 127.0.0.1:22: connection refused" });
      expect(err!.message).toContain("4005");
      expect(await results.get(name)).toBe(4005); // the client answered the close with its code
    });
  }

  it("resets the tunnel when destroyed before both sides closed", async () => {
    const url = ticket("reset", (peer) => peer.drain());
    const t = await connectTunnel(url, { apiKey: KEY });
    t.write("x");
    t.destroy();
    expect(await results.get("reset")).toBe(4009);
  });

  it("is refused with the status and the API's reason, else the documented one", async () => {
    for (const [ticket, status, reason] of [
      ["refuse-409", 409, "the ticket was used already: by the test"],
      ["refuse-599", 599, "refused: by the test"],
      ["refuse-503-quietly", 503, "the node has no session with a gateway"],
      ["refuse-502-quietly", 502, "Bad Gateway"],
    ] as const) {
      const err = await connectTunnel(`${base}/api/tunnels/${ticket}`, { apiKey: KEY }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TunnelRefusedError);
      expect(err).toMatchObject({ status, reason });
      expect((err as Error).message).toContain(String(status));
    }
    const err = await connectTunnel(ticket("wrong-key", echo), { apiKey: "bck_wrong" }).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 401, reason: "an API key is required" });
  });
});

describe("openTunnel", () => {
  /** A client whose tunnels.create answers with a ticket URL of the fake, recording the requests. */
  function client(name: string, behaviour: Behaviour, apiKey?: string) {
    const requests: tunnelsv1.CreateRequest[] = [];
    const canned: Interceptor = () => async (req) => {
      if (req.stream) throw new Error("streams");
      requests.push(req.message as tunnelsv1.CreateRequest);
      const message = create(tunnelsv1.CreateResponseSchema, {
        ticket: name,
        url: ticket(name, behaviour),
        tunnel: { id: `tunnel-${name}`, nodeId: "node-1", port: 22 },
      });
      return { stream: false, service: req.service, method: req.method, header: new Headers(), trailer: new Headers(), message };
    };
    const bc = createClient({ baseUrl: "http://canned.invalid/api", apiKey, interceptors: [canned] });
    return { bc, requests };
  }

  it("creates a ticket and opens it with the client's key", async () => {
    const { bc, requests } = client("open", echo, KEY);
    const t = await openTunnel(bc, "node-1", 22);
    expect(t.tunnel?.id).toBe("tunnel-open");
    expect(requests).toMatchObject([{ nodeId: "node-1", port: 22 }]);
    t.end("hello");
    expect((await readAll(t)).toString()).toBe(`hello${TRAILER}`);
  });

  it("refuses a bad port or a client without a key before creating anything", async () => {
    const { bc, requests } = client("nothing", echo);
    await expect(openTunnel(bc, "node-1", 70000)).rejects.toThrow(RangeError);
    await expect(openTunnel(bc, "node-1", 22)).rejects.toThrow("API key");
    expect(requests).toHaveLength(0);
  });

  it("is the README's example", async () => {
    const readme = await readFile(new URL("../README.md", import.meta.url), "utf8");
    const source = await readFile(new URL("../examples/tunnel.ts", import.meta.url), "utf8");
    const section = readme.split("\n## Tunnels\n")[1]?.split("\n## ")[0] ?? "";
    const blocks = [...section.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    expect(blocks).toHaveLength(1);
    expect(source, "README.md shows code that is not in examples/tunnel.ts").toContain(blocks[0].replace(/^(?=.)/gm, "  "));

    vi.spyOn(console, "log").mockImplementation(() => {});
    const { bc } = client("example", echo, KEY);
    const out = new PassThrough();
    const got = readAll(out);
    await example.copyThroughTunnel(bc, "node-1", Readable.from([Buffer.from("SSH-2.0-example\r\n")]), out);
    expect((await got).toString()).toBe(`SSH-2.0-example\r\n${TRAILER}`);
    expect(await results.get("example")).toBe("ok");
    vi.restoreAllMocks();
  });
});
