import { describe, expect, it } from '@jest/globals';
import { keysPage } from './keys-page.js';

describe('dashboard: the keys page', () => {
  it('shows each key’s priority band, standard where it names none', () => {
    const keys = [
      { id: 'key-1', name: 'chat', prefix: 'sk-llmgw-a', models: [], priority: 'interactive' as const, created_at: 'x' },
      { id: 'key-2', name: 'app', prefix: 'sk-llmgw-b', models: [], created_at: 'x' },
    ];
    const main = keysPage(keys, [], new Date()).main.toString();
    expect(main).toContain('<th scope="col">Priority</th>');
    expect(main).toMatch(/<th scope="row">chat<\/th>.*?<td>interactive<\/td>/s);
    expect(main).toMatch(/<th scope="row">app<\/th>.*?<td>standard<\/td>/s);
  });
});
