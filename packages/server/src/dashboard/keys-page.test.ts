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

  it('shows each key’s token quota beside its request rate', () => {
    const keys = [{ id: 'key-1', name: 'chat', prefix: 'sk-llmgw-a', models: [], rpm: 60, tpm: 30000, created_at: 'x' }];
    const main = keysPage(keys, [], new Date()).main.toString();
    expect(main).toContain('<th scope="col" class="num">RPM</th><th scope="col" class="num">TPM</th>');
    expect(main).toContain('<td class="num">60</td><td class="num">30000</td>');
  });
});
