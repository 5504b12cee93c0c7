import fs from 'node:fs';

/**
 * The server's version, read from its package.json: `../package.json` is the package's
 * own from both src/ (tests) and dist/ (the built server), so a release bump is one edit.
 */
export const SERVER_VERSION: string = (JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
