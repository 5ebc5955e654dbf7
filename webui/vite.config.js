// Builds the LLM tab's page into the Python package (swarm/live/webui/bundle), which the swarm's
// Locust plugin sets as the web UI's build path. `make webui` runs this; users need no node.
import { defineConfig } from "vite";

export default defineConfig({
  base: "./",
  esbuild: { jsx: "automatic" },
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir: "../swarm/live/webui/bundle",
    emptyOutDir: true,
    assetsDir: "assets",
    chunkSizeWarningLimit: 4000,
    rollupOptions: {
      output: { entryFileNames: "assets/llm-swarm-[hash].js" },
      // MUI's per-file "use client" directives mean nothing in a plain browser bundle
      onwarn: (w, warn) => w.code !== "MODULE_LEVEL_DIRECTIVE" && warn(w),
    },
  },
});
