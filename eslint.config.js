// One lint for the whole monorepo: each package runs `eslint .` from its own folder
// and finds this file. Type-aware rules read each package's own tsconfig.json through
// the project service, so a package is linted with exactly the compiler options it is
// built with.
import js from '@eslint/js';
import { defineConfig } from 'eslint/config';
import tseslint from 'typescript-eslint';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import { SERVER_LAYERS } from './packages/server/layers.js';

/**
 * `import-x/no-restricted-paths` zones from an ordered list of layers (rows of paths,
 * bottom first, relative to the package): each path may import only the rows below its
 * own. A top-level file's layer takes in its test (`errors.ts`, `errors.test.ts`). A
 * row may name a file inside a folder of a higher row (`test/factories.ts` low, the
 * rest of `test/` at the top); that folder's zone then excepts it.
 */
export function layerZones(layers, listFile) {
  const entries = layers.flatMap((row, i) => row.map((at) => ({ at, i })));
  const nested = (outer) => entries.filter((e) => e.at.startsWith(`${outer}/`));
  const message = (at) => `${at} imports only the layers below its own (${listFile}).`;
  return entries.flatMap(({ at, i }) => {
    const above = entries.filter((e) => e.i > i || (e.i === i && e.at !== at));
    if (!above.length) return [];
    if (nested(at).length) throw new Error(`${listFile}: ${at} holds a layer of its own inside; only the top row may`);
    const target = at.endsWith('.ts') ? [at, at.replace(/\.ts$/, '.test.ts')] : at;
    const plain = above.filter((e) => !nested(e.at).length).map((e) => e.at);
    const holders = above.filter((e) => nested(e.at).length);
    return [
      ...(plain.length ? [{ target, from: plain, message: message(at) }] : []),
      ...holders.map((h) => ({ target, from: h.at, except: nested(h.at).map((e) => `./${e.at.slice(h.at.length + 1)}`), message: message(at) })),
    ];
  });
}

export default defineConfig(
  {
    ignores: [
      '**/dist/**',
      '**/dist-bench/**',
      '**/node_modules/**',
      '**/test-artifacts/**',
      // tsup bundles its config to `tsup.config.bundled_<random>.mjs` beside it and
      // deletes it once loaded. A package whose build and lint start together (one with
      // no workspace dependencies) would otherwise list that file and then fail to read
      // it: ESLint exits 2 on ENOENT, which is how a CI run failed.
      '**/*.bundled_*.mjs',
    ],
  },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        // tsup.config.ts is build configuration, in no package's tsconfig include.
        projectService: { allowDefaultProject: ['packages/*/tsup.config.ts'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    plugins: { 'import-x': importX },
    settings: {
      // The cycle check parses each imported file itself; these say which files it reads
      // and with what (its default is JavaScript only).
      'import-x/extensions': ['.ts', '.js', '.mjs'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      // Sources import each other as `./x.js` (NodeNext) while the file on disk is
      // `x.ts`; the alias lets the cycle check follow those imports to the source.
      'import-x/resolver-next': [createNodeResolver({ extensionAlias: { '.js': ['.ts', '.js'] } })],
    },
    rules: {
      // A cycle makes module initialisation order matter and blurs which step comes
      // first; the layout is meant to read as a pipeline.
      'import-x/no-cycle': 'error',
      // Small files named after their step: past 400 lines a file is doing two steps.
      'max-lines': ['error', { max: 400 }],
      // `_`-prefixed names are deliberately unused (a callback's fixed signature).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // The Store interface is asynchronous for PostgreSQL; SQLite and test stores meet
      // it with async methods that answer at once. no-floating-promises and
      // no-misused-promises still catch every promise a caller forgets.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // The server's folders as layers, so that no folder imports one above it and no two
    // folders import each other: the per-file no-cycle cannot see a cycle of folders.
    files: ['packages/server/**/*.ts'],
    rules: {
      'import-x/no-restricted-paths': [
        'error',
        {
          basePath: `${import.meta.dirname}/packages/server`,
          zones: layerZones(SERVER_LAYERS, 'packages/server/layers.js'),
        },
      ],
    },
  },
  {
    // Plain JavaScript (jest configs, bench scripts, fixtures) is in no tsconfig, so it
    // is linted without type information.
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: {
        process: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        fetch: 'readonly',
        AbortController: 'readonly',
        performance: 'readonly',
        TextEncoder: 'readonly',
        TextDecoder: 'readonly',
      },
    },
  },
);
