import { CatalogSchema, ModelSchema, ProfileSchema, editDistance, nearest } from '@llmgw/shared';

// One edit distance for the catalog's hints, ctl's and the agent's (moved to shared).
export { editDistance };
import { q } from './errors.js';

/**
 * A required key is often missing only because it is misspelt next door (`engin: vllm`);
 * the validator reports the missing key, so point at the likely typo. The key found is
 * returned too, so its own "is not a known field" is not reported a second time.
 */
export function misspelling(data: unknown, field: string): { hint: string; key?: string } {
  const [parentPath, missing] = splitLast(field);
  const parent = valueAt(data, parentPath);
  if (typeof parent !== 'object' || parent === null || Array.isArray(parent)) return { hint: '' };
  const known = knownKeys(parentPath);
  const near = Object.keys(parent).find((k) => !known.includes(k) && editDistance(k, missing) <= 2);
  return near === undefined ? { hint: '' } : { hint: ` (is ${q(near)} a typo?)`, key: near };
}

/**
 * For a value that must be one of `options` (`engine: node-lama-cpp`), the option
 * closest to it, ignoring case, when it is close enough to be a typo.
 */
export function closestOption(data: unknown, field: string, options: string[]): string {
  const value = valueAt(data, field);
  if (typeof value !== 'string') return '';
  const near = nearest(value, options);
  return near !== undefined ? ` (did you mean ${near}?)` : '';
}

/** For an unknown key, the known key of that object closest to it. */
export function didYouMean(field: string): string {
  const [parentPath, unknown] = splitLast(field);
  const near = knownKeys(parentPath)
    .map((k) => ({ k, d: editDistance(k, unknown) }))
    .filter((c) => c.d <= 2)
    .sort((a, b) => a.d - b.d)[0];
  return near ? ` (did you mean ${near.k}?)` : '';
}

/** `models[0].profiles[1].engine` → [`models[0].profiles[1]`, `engine`]. */
function splitLast(field: string): [string, string] {
  const dot = field.lastIndexOf('.');
  return dot < 0 ? ['', field] : [field.slice(0, dot), field.slice(dot + 1)];
}

/** The keys the schema allows in the object at `path`. */
function knownKeys(path: string): string[] {
  return /profiles\[\d+\]$/.test(path)
    ? Object.keys(ProfileSchema.properties)
    : /^models\[\d+\]$/.test(path)
      ? Object.keys(ModelSchema.properties)
      : path.endsWith('.scaling')
        ? Object.keys(ModelSchema.properties.scaling.properties)
        : path === ''
          ? Object.keys(CatalogSchema.properties)
          : [];
}

/**
 * Follows a validator path through parsed data. Paths of required fields hold no dotted
 * keys; an enum's may (`node_selector` values are not enums), and then nothing is found.
 */
/**
 * For a field that must be a string but YAML read as a number or boolean (`sha256:`
 * of digits only, `name: 2024`, `label: true`), that quoting it is the fix.
 */
export function quoteHint(data: unknown, field: string): string {
  const value = valueAt(data, field);
  if (typeof value !== 'number' && typeof value !== 'boolean') return '';
  return ` (YAML reads an unquoted ${typeof value === 'number' ? 'number' : 'true or false'} as a ${typeof value}: put the value in quotes, e.g. "…")`;
}

/** The value at a validator's field path; a key may hold dots (`node_selector.nvidia.com/gpu.count`). */
function valueAt(data: unknown, path: string): unknown {
  let value = data;
  let rest = path;
  while (rest !== '') {
    if (typeof value !== 'object' || value === null) return undefined;
    const index = /^\[(\d+)\]\.?/.exec(rest);
    const key = index
      ? index[1]!
      : Object.keys(value)
          .filter((k) => rest === k || rest.startsWith(`${k}.`) || rest.startsWith(`${k}[`))
          .sort((a, b) => b.length - a.length)[0];
    if (key === undefined) return undefined;
    value = (value as Record<string, unknown>)[key];
    rest = (index ? rest.slice(index[0].length) : rest.slice(key.length)).replace(/^\./, '');
  }
  return value;
}
