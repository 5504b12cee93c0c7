import { ClientLeft } from './client-left.js';

describe('ClientLeft', () => {
  it('tells each listener once, and none removed or added after the client left', () => {
    const s = new ClientLeft();
    const heard: string[] = [];
    const a = () => heard.push('a');
    const b = () => heard.push('b');
    s.addEventListener('abort', a);
    s.addEventListener('abort', b);
    s.removeEventListener('abort', a);
    expect(s.aborted).toBe(false);
    s.leave();
    s.leave();
    s.addEventListener('abort', a);
    expect(s.aborted).toBe(true);
    expect(heard).toEqual(['b']);
  });
});
