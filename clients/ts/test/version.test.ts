// The SDK's version is clients/VERSION, shared with the Python SDK (no server needed).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";

const read = (path: string) => readFileSync(new URL(path, import.meta.url), "utf8");
const version = read("../../VERSION").trim();

describe("version", () => {
  it("package.json has clients/VERSION", () => {
    expect((JSON.parse(read("../package.json")) as { version: string }).version).toBe(version);
  });

  it("package-lock.json has clients/VERSION", () => {
    expect((JSON.parse(read("../package-lock.json")) as { version: string }).version).toBe(version);
  });

  it("CHANGELOG.md's newest entry is clients/VERSION", () => {
    const released = [...read("../CHANGELOG.md").matchAll(/^## \[(\d[^\]]*)\]/gm)].map((m) => m[1]);
    expect(released[0]).toBe(version);
  });
});
