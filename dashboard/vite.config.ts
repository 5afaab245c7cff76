// Builds the dashboard into dist/, which the Go package in this directory embeds and the API
// serves at /dashboard/. The output is committed (a fresh clone's `go run` serves it), so it must
// be deterministic: no source maps, no timestamps, hashed names from content only.
import { defineConfig } from "vite";

export default defineConfig({
  // Relative URLs: the same build works at /dashboard/ on the API and at the root of any origin.
  base: "./",
  resolve: {
    // The SDK is used from its source, so the dashboard needs no build of it and bundles only the
    // services it calls.
    alias: {
      "@better-compute/client": decodeURIComponent(new URL("../clients/ts/src/index.ts", import.meta.url).pathname),
    },
  },
  // `npm run dev` serves the SDK's source from ../clients/ts too.
  server: { fs: { allow: [".."] } },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    sourcemap: false,
    target: "es2022",
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});
