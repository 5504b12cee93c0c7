import { describe, expect, it } from '@jest/globals';
import { flagOrEnv, parseSwitch } from './switches.js';

describe('parseSwitch', () => {
  it.each(['1', 'true', 'TRUE', 'yes', 'On', ' on '])('reads %p as on', (v) => expect(parseSwitch('X', v)).toBe(true));
  it.each([undefined, '', '0', 'false', 'False', 'no', 'off', 'OFF'])('reads %p as off', (v) => expect(parseSwitch('X', v)).toBe(false));
  it.each(['maybe', '2', 'enabled', 'y'])('refuses %p, naming the variable', (v) => {
    expect(() => parseSwitch('LLMGW_INSECURE_HTTP', v)).toThrow(`invalid LLMGW_INSECURE_HTTP="${v}"`);
  });
});

describe('flagOrEnv', () => {
  it('is on with the flag whatever the variable, else as the variable says', () => {
    expect(flagOrEnv(true, 'X', { X: '0' })).toBe(true);
    expect(flagOrEnv(undefined, 'X', { X: '0' })).toBe(false);
    expect(flagOrEnv(undefined, 'X', { X: 'off' })).toBe(false);
    expect(flagOrEnv(undefined, 'X', { X: 'yes' })).toBe(true);
    expect(flagOrEnv(undefined, 'X', {})).toBe(false);
    expect(() => flagOrEnv(undefined, 'X', { X: 'maybe' })).toThrow('invalid X="maybe"');
  });
});
