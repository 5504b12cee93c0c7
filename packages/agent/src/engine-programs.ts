import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * The packages whose `bin` are llmgw's own engines; both are optional dependencies of
 * the agent, so a node that only runs vLLM can go without node-llama-cpp.
 */
export const ENGINE_PACKAGES: readonly string[] = ['@llmgw/test-engine', '@llmgw/engine-llama'];

/**
 * Each engine program installed with the agent, by its bin name, as an absolute script
 * path: read from the packages' `package.json` `bin`, so the agent runs the engines
 * without importing any of their code. A package that is not installed is left out.
 */
export function findEnginePrograms(packages: readonly string[] = ENGINE_PACKAGES, from: string = import.meta.url): Map<string, string> {
  const require = createRequire(from);
  const programs = new Map<string, string>();
  for (const name of packages) {
    let manifest: string;
    try {
      manifest = require.resolve(`${name}/package.json`);
    } catch {
      continue;
    }
    const { bin } = JSON.parse(readFileSync(manifest, 'utf8')) as { bin?: Record<string, string> };
    for (const [program, file] of Object.entries(bin ?? {})) programs.set(program, path.resolve(path.dirname(manifest), file));
  }
  return programs;
}
