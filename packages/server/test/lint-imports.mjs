// Lints each given text as if it were the file at the given path (relative to the
// repository root), with the repository's own eslint.config.js, and prints the
// messages of the layer rule for each, as JSON. Type-aware rules are left out: the
// files are not on disk, and the layer rule needs no types. Run from the root by
// test/layers.test.ts.
import { ESLint } from 'eslint';
import tseslint from 'typescript-eslint';

const cases = JSON.parse(process.argv[2]);
const eslint = new ESLint({ overrideConfig: [{ files: ['**/*.ts'], ...tseslint.configs.disableTypeChecked }] });
const out = [];
for (const c of cases) {
  const [result] = await eslint.lintText(c.code, { filePath: c.file });
  out.push(result.messages.filter((m) => m.ruleId === 'import-x/no-restricted-paths' || m.fatal).map((m) => m.message));
}
console.log(JSON.stringify(out));
