/**
 * HTML built from tagged templates. Every interpolation is escaped unless it is already
 * `Html`, so a node label or a model name from an agent or the catalog can never become
 * markup; the only way to emit raw text is `raw`, used for the page's own CSS and script.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

/** What a template accepts: text (escaped), numbers, nested HTML, lists of them, or nothing. */
export type Part = Html | string | number | boolean | null | undefined | readonly Part[];

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for element content and for double- or single-quoted attribute values. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

function render(p: Part): string {
  if (p === null || p === undefined || p === false || p === true) return '';
  if (p instanceof Html) return p.value;
  if (Array.isArray(p)) return p.map(render).join('');
  return escapeHtml(String(p));
}

/** The template tag: `html\`<td>${name}</td>\`` escapes `name`. */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  // strings has one more entry than values: each value sits between two strings.
  return new Html(strings.reduce((out, s, i) => out + render(values[i - 1]) + s));
}

/** Trusted markup, unescaped: only for constants of this module's own making. */
export function raw(s: string): Html {
  return new Html(s);
}

/** A path segment for an href: names may hold `/` (`meta-llama/Llama-3`). */
export function seg(s: string): string {
  return encodeURIComponent(s);
}
