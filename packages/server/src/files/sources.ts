/**
 * Sources that name a model file the agent fetches (README.md here), as opposed to a path
 * on the node or a hub id the engine downloads itself.
 */

/** The scheme of a file this server serves from `--models-dir`. */
export const LLMGW_SCHEME = 'llmgw://';

/** Whether `source` is a file an agent fetches and verifies: an http(s):// or llmgw:// URL. */
export function isFetchedSource(source: string): boolean {
  return /^https?:\/\//i.test(source) || source.startsWith(LLMGW_SCHEME);
}

/** The file name of an `llmgw://NAME` source, or undefined for any other source. */
export function llmgwName(source: string): string | undefined {
  return source.startsWith(LLMGW_SCHEME) ? source.slice(LLMGW_SCHEME.length) : undefined;
}

/**
 * Why `name` cannot be a file in `--models-dir`, or undefined when it can: one plain
 * file name, so a catalog (or an agent asking for it) can never reach outside the
 * directory. Subdirectories are left out on purpose; the directory is a flat store.
 */
export function badFileName(name: string): string | undefined {
  if (name === '') return 'names no file: write llmgw://FILE, a file in --models-dir';
  if (name.includes('/') || name.includes('\\')) return `"${name}" has a path in it: name one file directly in --models-dir`;
  if (name.startsWith('.')) return `"${name}" starts with a dot: hidden files and ".." are not served`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'has control characters in it';
  return undefined;
}

/** The file an assignment asks its agent to fetch, for a fetched source with its digest. */
export function fileOf(source: string, sha256: string | undefined, sizeBytes?: number): { url: string; sha256: string; size_bytes?: number } | undefined {
  if (!isFetchedSource(source) || sha256 === undefined) return undefined;
  // The digest is compared as sha256sum prints it.
  return { url: source, sha256: sha256.toLowerCase(), ...(sizeBytes !== undefined ? { size_bytes: sizeBytes } : {}) };
}

/** The SHA-256 (lower case) of the file a replica of `model` with `profile` fetches; undefined when none. */
export function fileDigestOf(
  model: { source: string; sha256?: string | undefined },
  profile: { source?: string | undefined; sha256?: string | undefined },
): string | undefined {
  const source = profile.source ?? model.source;
  return fileOf(source, profile.source !== undefined ? profile.sha256 : model.sha256)?.sha256;
}
