import { hashSecret } from '@llmgw/shared';
import type { Store } from '../src/store/store.js';

/**
 * A node that has joined, for tests that talk to the agent API directly: its
 * credential is written into the store before the server starts, as a join would have.
 */
export const NODE_CREDENTIAL = 'llmgw-node-test-credential-0123456789';

/** The `Authorization` header of the node seeded with `seedCredential`. */
export const nodeAuth = { authorization: `Bearer ${NODE_CREDENTIAL}` };

export async function seedCredential(store: Store, nodeId: string, secret = NODE_CREDENTIAL): Promise<void> {
  if (!(await store.addCredential({ nodeId, hash: hashSecret(secret), createdAt: new Date().toISOString() })))
    throw new Error(`${nodeId} already has a credential`);
}
