/**
 * The catalog's public surface, what the rest of the server imports. The steps, in the
 * order a catalog file goes through them: `parse.ts` (YAML, then the schema, with
 * `locate.ts` finding the line and `suggest.ts` the likely typo), `cross-check.ts`
 * (rules between fields and models), `loaded.ts` (the checked catalog and its lookups),
 * `watch.ts` (reloads on change and on SIGHUP, keeps the latest failure), `diff.ts` (what a
 * reload changed); `errors.ts` is the one error they throw, with every problem found.
 */
export { CatalogError, MAX_CATALOG_PROBLEMS, type CatalogErrorDetails, type CatalogProblem } from './errors.js';
export { LoadedCatalog, type CatalogModel, type CatalogProfile } from './loaded.js';
export { loadCatalog, parseCatalog } from './parse.js';
export { CatalogWatcher, type CatalogFailure, type CatalogWatcherOptions } from './watch.js';
export { describeDiff, diffCatalogs, type CatalogDiff } from './diff.js';
