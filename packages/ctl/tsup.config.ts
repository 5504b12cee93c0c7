import { defineConfig } from 'tsup';

// ctl is bundled with its dependencies inlined: loading chalk and commander from
// node_modules costs hundreds of milliseconds per call on these machines, and an
// operator's CLI must feel instant. Each command's code and what only it needs (the
// tables, chalk, cli-table3) is a chunk of its own, loaded when that command runs
// (`await import()` in cli.ts), so that `ctl nodes` parses no other command's code
// (issue 32: at most 2x a bare `node -e 0`; bench/ctl.bench.mjs).
export default defineConfig({
  entry: ['src/cli.ts'],
  format: ['esm'],
  target: 'node20',
  sourcemap: false,
  clean: true,
  minify: true,
  splitting: true,
  noExternal: [/.*/],
  // @llmgw/shared from its sources, each file a module of its own, dropped when ctl uses
  // none of its exports (shared's package.json: sideEffects false). Its dist is one file,
  // so the smallest import from it brought its validators (ajv, 120 KB of the bundle) and
  // TypeBox's schemas, which ctl never uses.
  esbuildOptions(options) {
    options.alias = { '@llmgw/shared': '../shared/src/index.ts' };
  },
  banner: {
    js: "#!/usr/bin/env node\nimport { createRequire as __llmgwCreateRequire } from 'node:module';\nconst require = __llmgwCreateRequire(import.meta.url);",
  },
});
