// Tunnels for Node.js (@better-compute/client/tunnel): a byte stream to a TCP port on a node's
// loopback, as a stream.Duplex. The main entry point stays free of Node modules, for browsers.
//
// The WebSocket is spoken here, over node:http's upgrade, rather than with the WebSocket of the
// platform: Node 20 has none without a flag, and the WebSocket API can neither send an
// Authorization header nor stop reading when the reader is slow (this pauses the socket, so
// TCP's flow control holds the sender back). docs/tunnels.md describes the protocol: one binary
// message is one frame, a type byte (0 data, 1 close-write, 2 abort) and its payload.
import { createHash, randomBytes } from "node:crypto";
import { type Agent, type IncomingMessage, request as httpRequest, STATUS_CODES } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import { Duplex } from "node:stream";

import type { Tunnel } from "./gen/bettercompute/tunnels/v1/tunnels_pb.js";
import type { BetterCompute } from "./index.js";
import { apiKeyOf } from "./keys.js";

/** The WebSocket subprotocol of tunnels. */
export const SUBPROTOCOL = "bettercompute.tunnel.v1";

/** The largest payload of one frame: writes are cut into frames of at most this many bytes. */
export const MAX_PAYLOAD = 64 * 1024;

/** What a frame carries. */
export const FrameType = {
  /** Bytes of the stream. */
  DATA: 0,
  /** The sender sends no more (a half-close); the other direction keeps flowing. */
  CLOSE_WRITE: 1,
  /** The tunnel ends at once: a close code and a reason. */
  ABORT: 2,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

/** One frame of a tunnel: one binary WebSocket message. */
export interface Frame {
  type: FrameType;
  payload: Uint8Array;
}

/** Why a tunnel ended: the WebSocket close codes of docs/tunnels.md and what each means. */
export const CLOSE_CODES: Readonly<Record<number, string>> = {
  1000: "closed by both sides",
  1001: "the API is shutting down",
  1011: "internal error",
  4000: "idle for too long",
  4001: "the lease that allowed the tunnel ended",
  4002: "the node was revoked, retired or drained",
  4003: "the node's daemon does not allow the port",
  4004: "the node is offline or did not answer",
  4005: "nothing listens on the port on the node",
  4006: "the gateway or the node's stream went away",
  4007: "protocol error",
  4008: "closed by an operator",
  4009: "a connection at one end was reset",
};

/** Why the API refused to open a tunnel, by HTTP status (docs/tunnels.md); nothing was opened. */
export const REFUSALS: Readonly<Record<number, string>> = {
  401: "an API key is required",
  404: "no such ticket",
  403: "the ticket is another tenant's",
  409: "the ticket was used already",
  410: "the ticket expired",
  426: `a WebSocket upgrade with subprotocol ${SUBPROTOCOL} is required`,
  429: "too many open tunnels for the node or the tenant",
  503: "the node has no session with a gateway",
  412: "the tunnel is no longer allowed (lease ended, node gone)",
};

const CODE_GATEWAY_LOST = 4006;
const CODE_PROTOCOL = 4007;
const CODE_RESET = 4009;
const MAX_REASON = 123; // bytes: what a WebSocket close frame can carry

/** A tunnel that ended before both sides closed it: the close code and the reason. */
export class TunnelAbortError extends Error {
  constructor(
    /** The close code (CLOSE_CODES), for example 4005: nothing listens on the port. */
    readonly code: number,
    readonly reason: string,
  ) {
    const what = `${code} (${CLOSE_CODES[code] ?? "unknown"})`;
    super(reason ? `tunnel aborted: ${what}: ${reason}` : `tunnel aborted: ${what}`);
    this.name = "TunnelAbortError";
  }
}

/**
 * A tunnel the API refused to open, with an HTTP status (REFUSALS); `reason` is the API's text,
 * the documented reason and a detail ("the ticket was used already: a ticket opens one tunnel:
 * create another").
 */
export class TunnelRefusedError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
  ) {
    super(`tunnel refused: HTTP ${status}: ${reason}`);
    this.name = "TunnelRefusedError";
  }
}

/** Encodes a frame as its WebSocket message: the type byte, then the payload. */
export function encodeMessage(frame: Frame): Uint8Array {
  if (frame.payload.length > MAX_PAYLOAD) throw new RangeError(`a frame's payload is at most ${MAX_PAYLOAD} bytes`);
  const msg = new Uint8Array(1 + frame.payload.length);
  msg[0] = frame.type;
  msg.set(frame.payload, 1);
  return msg;
}

/** Reads a WebSocket message as a frame; throws on a malformed one. */
export function parseMessage(msg: Uint8Array): Frame {
  if (msg.length === 0 || msg[0] > FrameType.ABORT || msg.length - 1 > MAX_PAYLOAD) {
    throw new TunnelAbortError(CODE_PROTOCOL, `a WebSocket message of ${msg.length} bytes`);
  }
  return { type: msg[0] as FrameType, payload: msg.subarray(1) };
}

/** An abort frame's payload: the code (uint16, big endian), then the reason, cut to 123 bytes of UTF-8. */
export function abortPayload(code: number, reason: string): Uint8Array {
  let r = Buffer.from(reason, "utf8");
  if (r.length > MAX_REASON) {
    let n = MAX_REASON;
    while (n > 0 && (r[n] & 0xc0) === 0x80) n--; // not inside a character
    r = r.subarray(0, n);
  }
  const p = Buffer.allocUnsafe(2 + r.length);
  p.writeUInt16BE(code, 0);
  r.copy(p, 2);
  return p;
}

/** Reads an abort frame's payload. */
export function parseAbort(payload: Uint8Array): { code: number; reason: string } {
  if (payload.length < 2) return { code: CODE_PROTOCOL, reason: "abort frame without a code" };
  const b = Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength);
  return { code: b.readUInt16BE(0), reason: b.toString("utf8", 2) };
}

/** Options of openTunnel and connectTunnel. */
export interface TunnelOptions {
  /** The API key to open the WebSocket with; by default the one the client was created with. */
  apiKey?: string;
  /** Aborts the opening (not the open tunnel: destroy it for that). */
  signal?: AbortSignal;
  /** The agent of the WebSocket's HTTP request, for example an https.Agent with a private CA. */
  agent?: Agent;
}

/**
 * Opens a tunnel to `port` on the loopback of node `nodeId`: tunnels.create makes a ticket, which
 * is opened as a WebSocket with the client's API key. The result is a Duplex of the tunnel's
 * bytes: write to send (in frames of at most 64 KiB), end() to half-close (the node's end reads
 * EOF, and its answer keeps coming), read until 'end', which is the node's end closing its side.
 * An abort destroys it with a TunnelAbortError (its `code` says why, CLOSE_CODES); a refused
 * opening rejects with a TunnelRefusedError, a refused create with a ConnectError. destroy()
 * before both sides closed resets the tunnel (4009 at the node's end).
 */
export async function openTunnel(
  bc: BetterCompute,
  nodeId: string,
  port: number,
  options: TunnelOptions = {},
): Promise<TunnelSocket> {
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new RangeError(`port must be 1 to 65535, got ${port}`);
  }
  const apiKey = options.apiKey ?? apiKeyOf(bc);
  if (!apiKey) throw new Error("openTunnel needs an API key: create the client with apiKey, or pass options.apiKey");
  const res = await bc.tunnels.create({ nodeId, port }, { signal: options.signal });
  const socket = await connectTunnel(res.url, { ...options, apiKey });
  socket.tunnel = res.tunnel;
  return socket;
}

const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** Opens a ticket's URL (tunnels.create's `url`) as a tunnel; openTunnel does both steps. */
export function connectTunnel(url: string, options: TunnelOptions & { apiKey: string }): Promise<TunnelSocket> {
  const u = new URL(url);
  const secure = u.protocol === "wss:" || u.protocol === "https:";
  if (!secure && u.protocol !== "ws:" && u.protocol !== "http:") {
    return Promise.reject(new Error(`a tunnel URL is ws: or wss:, got ${u.protocol}`));
  }
  u.protocol = secure ? "https:" : "http:";
  const key = randomBytes(16).toString("base64");
  const req = (secure ? httpsRequest : httpRequest)(u, {
    method: "GET",
    agent: options.agent,
    signal: options.signal,
    headers: {
      Connection: "Upgrade",
      Upgrade: "websocket",
      "Sec-WebSocket-Version": "13",
      "Sec-WebSocket-Key": key,
      "Sec-WebSocket-Protocol": SUBPROTOCOL,
      Authorization: `Bearer ${options.apiKey}`,
      "X-Better-Compute": "1",
    },
  });
  return new Promise((resolve, reject) => {
    req.on("error", reject);
    req.on("response", (res: IncomingMessage) => {
      // Not upgraded: a refusal. The API's text (the reason and a detail) is the first line of
      // a text/plain body; keep its first KiB.
      const status = res.statusCode ?? 0;
      const text = res.headers["content-type"]?.startsWith("text/plain") ?? false;
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (b: Buffer) => {
        if (size < 1024) chunks.push(b);
        size += b.length;
      });
      res.on("error", () => {});
      res.on("close", () => {
        const line = text ? Buffer.concat(chunks).subarray(0, 1024).toString("utf8").split("\n")[0].trim() : "";
        reject(new TunnelRefusedError(status, line || REFUSALS[status] || STATUS_CODES[status] || "refused"));
      });
    });
    req.on("upgrade", (res: IncomingMessage, socket: Socket, head: Buffer) => {
      const accept = createHash("sha1").update(key + WS_GUID).digest("base64");
      let problem = "";
      if (res.headers.upgrade?.toLowerCase() !== "websocket") problem = `Upgrade ${res.headers.upgrade}`;
      else if (res.headers["sec-websocket-accept"] !== accept) problem = "a wrong Sec-WebSocket-Accept";
      else if (res.headers["sec-websocket-protocol"] !== SUBPROTOCOL) {
        problem = `subprotocol ${JSON.stringify(res.headers["sec-websocket-protocol"] ?? "")}, not ${SUBPROTOCOL}`;
      }
      if (problem) {
        socket.destroy();
        reject(new Error(`the API upgraded the tunnel with ${problem}`));
        return;
      }
      resolve(new TunnelSocket(socket, head));
    });
    req.end();
  });
}

const OP_CONTINUATION = 0x0;
const OP_TEXT = 0x1;
const OP_BINARY = 0x2;
const OP_CLOSE = 0x8;
const OP_PING = 0x9;
const OP_PONG = 0xa;

/** A WebSocket frame as it arrives. */
interface WsFrame {
  fin: boolean;
  opcode: number;
  payload: Buffer;
  size: number; // of the frame, header included
}

/** Reads one WebSocket frame from the start of b; undefined until it is all there. */
function readWsFrame(b: Buffer): WsFrame | undefined {
  if (b.length < 2) return undefined;
  const fin = (b[0] & 0x80) !== 0;
  const opcode = b[0] & 0x0f;
  if ((b[0] & 0x70) !== 0) throw new TunnelAbortError(CODE_PROTOCOL, "a WebSocket frame with reserved bits");
  const masked = (b[1] & 0x80) !== 0;
  let len = b[1] & 0x7f;
  let off = 2;
  if (len === 126) {
    if (b.length < 4) return undefined;
    len = b.readUInt16BE(2);
    off = 4;
  } else if (len === 127) {
    if (b.length < 10) return undefined;
    const big = b.readBigUInt64BE(2);
    if (big > BigInt(1 + MAX_PAYLOAD)) throw new TunnelAbortError(CODE_PROTOCOL, `a WebSocket frame of ${big} bytes`);
    len = Number(big);
    off = 10;
  }
  if (len > 1 + MAX_PAYLOAD) throw new TunnelAbortError(CODE_PROTOCOL, `a WebSocket frame of ${len} bytes`);
  const mask = masked ? off : -1;
  if (masked) off += 4;
  if (b.length < off + len) return undefined;
  let payload = b.subarray(off, off + len);
  if (mask >= 0) {
    payload = Buffer.from(payload);
    for (let i = 0; i < len; i++) payload[i] ^= b[mask + (i & 3)];
  }
  return { fin, opcode, payload, size: off + len };
}

/** A masked client frame of opcode: the optional tunnel frame type byte, then payload. */
function wsFrame(opcode: number, payload: Uint8Array, type?: FrameType): Buffer {
  const n = payload.length + (type === undefined ? 0 : 1);
  const ext = n < 126 ? 0 : n < 65536 ? 2 : 8;
  const b = Buffer.allocUnsafe(2 + ext + 4 + n);
  b[0] = 0x80 | opcode;
  if (ext === 0) {
    b[1] = 0x80 | n;
  } else if (ext === 2) {
    b[1] = 0x80 | 126;
    b.writeUInt16BE(n, 2);
  } else {
    b[1] = 0x80 | 127;
    b.writeBigUInt64BE(BigInt(n), 2);
  }
  const m = 2 + ext;
  randomBytes(4).copy(b, m);
  const o = m + 4;
  let i = 0;
  if (type !== undefined) b[o + i++] = type ^ b[m];
  for (let j = 0; j < payload.length; j++, i++) b[o + i] = payload[j] ^ b[m + (i & 3)];
  return b;
}

/**
 * An open tunnel: a Duplex of its bytes (see openTunnel). `tunnel` is the tunnel tunnels.create
 * returned (its id for tunnels.close).
 */
export class TunnelSocket extends Duplex {
  /** The tunnel as tunnels.create returned it; unset when opened with connectTunnel. */
  tunnel?: Tunnel;

  readonly #socket: Socket;
  #buf: Buffer = Buffer.alloc(0);
  #fragments: Buffer[] | undefined;
  #fragmentsSize = 0;
  #readDone = false; // the node's end's close-write came
  #writeDone = false; // ours went
  #closeSent = false;
  #closeReceived = false;
  #waiting: ((err?: Error) => void) | undefined; // a write waiting for the socket to drain

  /** Wraps an upgraded socket; head is what came after the handshake. Use openTunnel. */
  constructor(socket: Socket, head: Buffer) {
    super({ allowHalfOpen: true });
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.on("data", (b: Buffer) => this.#onData(b));
    socket.on("drain", () => this.#drained());
    socket.on("error", (err) => this.destroy(err));
    socket.on("close", () => this.#onSocketClose());
    if (head.length > 0) this.#onData(head);
  }

  override _read(): void {
    this.#socket.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.#closeReceived || this.#socket.destroyed) {
      callback(new Error("tunnel: the WebSocket is closed"));
      return;
    }
    let ok = true;
    for (let off = 0; off < chunk.length; off += MAX_PAYLOAD) {
      ok = this.#socket.write(wsFrame(OP_BINARY, chunk.subarray(off, off + MAX_PAYLOAD), FrameType.DATA));
    }
    if (ok) callback();
    else this.#waiting = callback;
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.#closeReceived || this.#socket.destroyed) {
      callback(new Error("tunnel: the WebSocket is closed"));
      return;
    }
    this.#writeDone = true;
    this.#socket.write(wsFrame(OP_BINARY, new Uint8Array(0), FrameType.CLOSE_WRITE));
    callback();
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    let code = 1000;
    let reason = "";
    if (err instanceof TunnelAbortError) {
      code = err.code;
      reason = err.reason;
    } else if (err) {
      code = CODE_RESET;
      reason = err.message;
    } else if (!(this.#readDone && this.#writeDone)) {
      code = CODE_RESET;
      reason = "the client closed the tunnel";
    }
    this.#close(code, reason);
    this.#drained(err ?? new Error("tunnel: destroyed"));
    callback(err);
  }

  #drained(err?: Error): void {
    const cb = this.#waiting;
    this.#waiting = undefined;
    cb?.(err);
  }

  /** Sends a close frame (once) and ends the socket, which the API closes in answer. */
  #close(code: number, reason: string): void {
    const s = this.#socket;
    if (!this.#closeSent && !s.destroyed && s.writable) {
      this.#closeSent = true;
      const p = abortPayload(code, reason); // the same layout: code, then reason
      s.write(wsFrame(OP_CLOSE, code === 1005 ? new Uint8Array(0) : p));
    }
    if (!s.destroyed) {
      s.end();
      s.resume(); // read until the API closes, so the end is clean
      setTimeout(() => s.destroy(), 5000).unref();
    }
  }

  #onSocketClose(): void {
    this.#drained(new Error("tunnel: the WebSocket closed"));
    if (this.destroyed) return;
    if (!this.#closeReceived) {
      this.destroy(new Error("tunnel: the connection to the API was lost"));
    } else if (!this.#writeDone) {
      // Normally closed before we closed our side: writes cannot go anywhere now.
      this.destroy(this.#readDone ? undefined : new TunnelAbortError(CODE_GATEWAY_LOST, "the stream ended without closing"));
    }
  }

  #onData(chunk: Buffer): void {
    this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
    try {
      for (;;) {
        if (this.destroyed) return;
        const f = readWsFrame(this.#buf);
        if (!f) return;
        this.#buf = this.#buf.subarray(f.size);
        this.#onFrame(f);
      }
    } catch (err) {
      const e = err instanceof TunnelAbortError ? err : new TunnelAbortError(CODE_PROTOCOL, String(err));
      this.#sendAbort(e);
      this.destroy(e);
    }
  }

  #sendAbort(e: TunnelAbortError): void {
    if (!this.#closeSent && !this.#socket.destroyed) {
      this.#socket.write(wsFrame(OP_BINARY, abortPayload(e.code, e.reason), FrameType.ABORT));
    }
  }

  #onFrame(f: WsFrame): void {
    switch (f.opcode) {
      case OP_PING:
        if (!this.#closeSent) this.#socket.write(wsFrame(OP_PONG, f.payload));
        return;
      case OP_PONG:
        return;
      case OP_CLOSE: {
        this.#closeReceived = true;
        const { code, reason } = f.payload.length >= 2 ? parseAbort(f.payload) : { code: 1005, reason: "" };
        this.#close(code, reason); // the answer: the same code
        if (code === 1000 || code === 1005) {
          if (!this.#readDone) this.destroy(new TunnelAbortError(CODE_GATEWAY_LOST, "the stream ended without closing"));
        } else {
          this.destroy(new TunnelAbortError(code, reason));
        }
        return;
      }
      case OP_TEXT:
        throw new TunnelAbortError(CODE_PROTOCOL, "a text message");
      case OP_BINARY:
        if (this.#fragments) throw new TunnelAbortError(CODE_PROTOCOL, "a message inside a fragmented one");
        if (f.fin) {
          this.#onMessage(f.payload);
          return;
        }
        this.#fragments = [f.payload];
        this.#fragmentsSize = f.payload.length;
        return;
      case OP_CONTINUATION: {
        if (!this.#fragments) throw new TunnelAbortError(CODE_PROTOCOL, "a continuation without a message");
        this.#fragments.push(f.payload);
        this.#fragmentsSize += f.payload.length;
        if (this.#fragmentsSize > 1 + MAX_PAYLOAD) {
          throw new TunnelAbortError(CODE_PROTOCOL, `a message over ${1 + MAX_PAYLOAD} bytes`);
        }
        if (f.fin) {
          const msg = Buffer.concat(this.#fragments);
          this.#fragments = undefined;
          this.#onMessage(msg);
        }
        return;
      }
      default:
        throw new TunnelAbortError(CODE_PROTOCOL, `WebSocket opcode ${f.opcode}`);
    }
  }

  #onMessage(msg: Buffer): void {
    const f = parseMessage(msg);
    if (f.type === FrameType.ABORT) {
      const { code, reason } = parseAbort(f.payload);
      this.destroy(new TunnelAbortError(code, reason));
      return;
    }
    if (this.#readDone) throw new TunnelAbortError(CODE_PROTOCOL, "a frame after close-write");
    if (f.type === FrameType.CLOSE_WRITE) {
      this.#readDone = true;
      this.push(null);
    } else if (f.payload.length > 0 && !this.push(f.payload)) {
      this.#socket.pause(); // _read resumes it
    }
  }
}
