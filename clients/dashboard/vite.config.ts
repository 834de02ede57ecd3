/**
 * The dashboard's build: Vite (Rolldown + Oxc) with Preact's automatic JSX runtime, no plugin. `npm run build`
 * writes dist/dashboard, which the control plane serves at `/` (control-plane/src/dashboard.ts).
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/',
  logLevel: 'warn',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: fileURLToPath(new URL('../../dist/dashboard', import.meta.url)),
    emptyOutDir: true,
    // Served with a strict CSP: no inline scripts or data: module preloads.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    reportCompressedSize: false,
    chunkSizeWarningLimit: 2048,
  },
});
