import { badFileName, isFetchedSource, llmgwName } from '../files/sources.js';
import type { CatalogModel } from './loaded.js';

/** What the server offers that a catalog may rely on. */
export interface CatalogRules {
  /** The server serves `llmgw://` files (it was started with `--models-dir`). */
  modelsDir?: boolean;
}

const NEEDS_DIGEST = 'is required with an http(s):// or llmgw:// source: the SHA-256 agents verify the file against (sha256sum FILE prints it)';

/**
 * The rules of sources agents fetch (files/README.md): such a source needs its `sha256`
 * (a file is never served unverified), a `sha256` needs such a source (else it would
 * be silently ignored), and `llmgw://FILE` needs `--models-dir` and a plain file name.
 */
export function checkSources(m: CatalogModel, at: string, fail: (field: string, problem: string) => void, rules: CatalogRules): void {
  const checkOne = (where: string, source: string, sha256: string | undefined, needsDigest: boolean) => {
    if (isFetchedSource(source)) {
      if (sha256 === undefined && needsDigest) fail(`${where}.sha256`, NEEDS_DIGEST);
      const name = llmgwName(source);
      if (name !== undefined) {
        const bad = badFileName(name);
        if (bad) fail(`${where}.source`, `llmgw:// ${bad}`);
        else if (!rules.modelsDir)
          fail(
            `${where}.source`,
            `${source} is served from the server's --models-dir: start llmgw-server with --models-dir DIR holding ${name}, or use an http(s):// URL`,
          );
      }
    } else if (sha256 !== undefined) {
      fail(`${where}.sha256`, 'is only used with an http(s):// or llmgw:// source, which agents fetch and verify; remove it, or give the file as a URL');
    }
  };
  // The model's own source needs its digest only where a profile runs it.
  checkOne(
    at,
    m.source,
    m.sha256,
    m.profiles.some((p) => p.source === undefined),
  );
  // An adapter is fetched like a model file, so it is held to the same rules.
  (m.adapters ?? []).forEach((a, j) => checkOne(`${at}.adapters[${j}]`, a.source, a.sha256, true));
  m.profiles.forEach((p, j) => {
    const where = `${at}.profiles[${j}]`;
    if (p.source !== undefined) checkOne(where, p.source, p.sha256, true);
    else if (p.sha256 !== undefined)
      fail(`${where}.sha256`, "is the digest of the profile's own source: give that source too, or put sha256 beside the model's source");
  });
}
