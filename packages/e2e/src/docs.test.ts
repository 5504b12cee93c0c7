import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { root } from './harness.js';
import { anchors, links, problem } from './md-links.js';
import { examples, match, substitute } from './readme-doc.js';

/**
 * The docs without a live instance: every link of every tracked Markdown file stays in
 * the repository and names something there, and the placeholder rules by which
 * readme.test.ts compares the README's examples with a live run match what they should
 * and nothing else.
 */

const tracked = new Set(execFileSync('git', ['ls-files'], { cwd: root, encoding: 'utf8' }).split('\n').filter(Boolean));
const markdown = [...tracked].filter((f) => f.endsWith('.md'));

describe('links', () => {
  it('every relative link of every tracked .md names a tracked file or folder, and every anchor a heading', () => {
    expect(markdown).toContain('README.md');
    const all = markdown.flatMap((f) => links(f, fs.readFileSync(`${root}/${f}`, 'utf8')));
    expect(all.length).toBeGreaterThan(0);
    expect(
      all.flatMap((l) => {
        const p = problem(root, tracked, l);
        return p ? [`${l.file}:${l.line}: ${p}`] : [];
      }),
    ).toEqual([]);
  });

  it('finds a broken link, an escape by ../, and a missing anchor', () => {
    const md =
      '# Quick start\n## ctl\nsee [a](packages/nope.md), [b](../shared/DESIGN.md), [c](#quick-start), [d](#nowhere), [e](README.md#ctl)\n`[f](ignored.md)`\n```\n[g](ignored.md)\n```\n[h]: bench/README.md\n';
    const found = links('README.md', md);
    expect(found.map((l) => l.target)).toEqual(['packages/nope.md', '../shared/DESIGN.md', '#quick-start', '#nowhere', 'README.md#ctl', 'bench/README.md']);
    expect(found.map((l) => problem(root, tracked, l))).toEqual([
      'packages/nope.md: no packages/nope.md in the repository (git ls-files)',
      '../shared/DESIGN.md leaves the repository',
      undefined,
      '#nowhere: no heading makes #nowhere in README.md',
      undefined,
      undefined,
    ]);
    expect(anchors('# A `b` c\n## The gateway\n## The gateway\n### ctl: x.y\n')).toEqual(new Set(['a-b-c', 'the-gateway', 'the-gateway-1', 'ctl-xy']));
  });
});

describe('the README examples', () => {
  it('are read from the marked blocks only, with their exit codes', () => {
    const md = [
      '## Quick start',
      '```console',
      '$ not-marked',
      '```',
      '<!-- readme-test -->',
      '```console',
      '$ ctl nodez           # exit 2',
      'error: x',
      'run y',
      '$ curl -N a \\',
      '  -d b',
      '…',
      '```',
      '  <!-- readme-test -->',
      '  ```sh',
      '  export A=1   # a comment',
      '  # only a comment',
      '  ctl nodes',
      '  ```',
    ].join('\n');
    expect(examples(md)).toEqual([
      { section: 'Quick start', line: 7, command: 'ctl nodez           # exit 2', exit: 2, output: ['error: x', 'run y'] },
      { section: 'Quick start', line: 10, command: 'curl -N a \\\n  -d b', exit: 0, output: ['…'] },
      { section: 'Quick start', line: 16, command: 'export A=1   # a comment', exit: 0 },
      { section: 'Quick start', line: 18, command: 'ctl nodes', exit: 0 },
    ]);
    expect(() => examples('<!-- readme-test -->\n```\nx\n```\n')).toThrow(/must be followed by/);
  });

  it('match what truly varies, bind ids and secrets for later commands, and nothing else', () => {
    const table = ['ID          MODEL  STATE  ENDPOINT                AGE', 'r-9e4e6440  tiny   ready  http://127.0.0.1:40000  37s'];
    const bound = match(table, ['ID          MODEL  STATE  ENDPOINT                AGE', 'r-0123abcd  tiny   ready  http://127.0.0.1:40417  2m', '']);
    expect(bound).toEqual(
      new Map([
        ['r-9e4e6440', 'r-0123abcd'],
        ['http://127.0.0.1:40000', 'http://127.0.0.1:40417'],
      ]),
    );
    expect(substitute('ctl logs r-9e4e6440 && echo xr-9e4e6440', bound!)).toBe('ctl logs r-0123abcd && echo xr-9e4e6440');
    expect(substitute('curl -s http://127.0.0.1:40000/v1/models', bound!)).toBe('curl -s http://127.0.0.1:40417/v1/models');
    // A different word, state or column, an id of another kind, a port outside the engines' range: no match.
    expect(match(table, [table[0]!, 'r-0123abcd  tiny   failed  http://127.0.0.1:40417  2m'])).toBeUndefined();
    expect(match(table, [table[0]!, 'key-0123abcd  tiny   ready  http://127.0.0.1:40417  2m'])).toBeUndefined();
    expect(match(table, [table[0]!, 'r-0123abcd  tiny   ready  http://127.0.0.1:8080  2m'])).toBeUndefined();
    expect(match(table, [table[0]!])).toBeUndefined();
    expect(match(table, [...table, 'one line more'])).toBeUndefined();

    const secret = ['key/key-a033492a created for me', 'secret: sk-llmgw-…'];
    const b2 = match(secret, ['key/key-77aa0011 created for me', 'secret: sk-llmgw-AbC_9']);
    expect(b2?.get('sk-llmgw-…')).toBe('sk-llmgw-AbC_9');
    expect(substitute('export SECRET=sk-llmgw-…', b2!)).toBe('export SECRET=sk-llmgw-AbC_9');
    expect(match(secret, ['key/key-77aa0011 created for you', 'secret: sk-llmgw-AbC_9'])).toBeUndefined();
    // An id seen before must be the same object; a prefix cut short is not bound.
    const list = ['ID            PREFIX', 'key-a033492a  sk-llmgw-…'];
    expect(match(list, ['ID            PREFIX', 'key-77aa0011  sk-llmgw-AbC…'], b2)).toEqual(b2);
    expect(match(list, ['ID            PREFIX', 'key-77aa0012  sk-llmgw-AbC…'], b2)).toBeUndefined();

    // A line of its own `…` skips any number of lines; versions and pids match any.
    expect(match(['a', '…', 'data: [DONE]'], ['a', 'x', 'y', 'data: [DONE]'])).toBeDefined();
    expect(match(['a', '…', 'data: [DONE]'], ['a', 'data: [DONE]'])).toBeDefined();
    expect(match(['a', '…', 'data: [DONE]'], ['a', 'x'])).toBeUndefined();
    expect(match(['Client Version: 0.1.0 (Node.js v20.20.2)'], ['Client Version: 0.2.0 (Node.js v22.1.0)'])).toBeDefined();
    expect(match(['Client Version: 0.1.0 (Node.js v20.20.2)'], ['Client Version: 0.2.0 (Deno v22.1.0)'])).toBeUndefined();
    expect(match(['llmgw: running (pid 4242, client x)'], ['llmgw: running (pid 17, client x)'])).toBeDefined();
    expect(match(['error: no node "nope"'], ['error: no node "nop"'])).toBeUndefined();
  });
});
