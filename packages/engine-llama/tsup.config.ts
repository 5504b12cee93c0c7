import { defineConfig } from 'tsup';

export default defineConfig({
  entry: ['src/main.ts'],
  // node-llama-cpp loads its native addon and prebuilt binaries relative to its own
  // files; bundling it would break that, so it stays external (tsup's default for
  // dependencies, stated here so nobody "fixes" it with noExternal).
  external: ['node-llama-cpp', /^@node-llama-cpp\//],
  format: ['esm'],
  target: 'node20',
  sourcemap: true,
  clean: true,
  banner: { js: '#!/usr/bin/env node' },
});
