import preact from "@preact/preset-vite";
import { defineConfig } from "vite";

// Served by the control plane under /ui/ (packages/control-plane/src/http/console.ts); asset names
// carry their content hash, so the server may cache them for a year.
export default defineConfig({
  base: "/ui/",
  plugins: [preact()],
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false },
});
