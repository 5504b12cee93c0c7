import { defineConfig } from 'tsup';

// ctl is bundled into one file with its dependencies inlined: loading got, chalk and
// commander from node_modules costs hundreds of milliseconds per call on these
// machines, and an operator's CLI must feel instant.
export default defineConfig({
  entry: ['src/cli.ts'],
  format: ['esm'],
  target: 'node20',
  sourcemap: false,
  clean: true,
  minify: true,
  noExternal: [/.*/],
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __llmgwCreateRequire } from 'node:module';\nconst require = __llmgwCreateRequire(import.meta.url);",
  },
});
