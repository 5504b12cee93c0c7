import { afterEach, describe, expect, it } from '@jest/globals';
import { makeReplica } from '../../test/factories.js';
import { closeAll, reply, setup } from './testing.js';

afterEach(closeAll);

describe("the gateway's 503 for a model with no replica to route to", () => {
  it('calls a ready replica whose node stopped reporting unknown and names the node, as ctl replicas does (issue 30)', async () => {
    const { url, secret, ctl } = await setup(() => {}, {}, 0);
    const heard = makeReplica({ id: 'r-1', model: 'm', state: 'starting' });
    const silent = makeReplica({ id: 'r-9', model: 'm', state: 'ready', endpoint: 'http://127.0.0.1:1' });
    ctl.listReplicas = () => [heard, silent];
    ctl.unheard = (r) => (r.id === 'r-9' ? ['node-7'] : []);
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(res.status).toBe(503);
    const message = reply(await res.text()).error.message;
    expect(message).toContain('no ready replica (r-1 starting, r-9 unknown: node node-7 stopped reporting)');
    expect(message).not.toContain('r-9 ready');
  });
});
