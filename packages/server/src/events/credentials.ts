import type { CredentialEventReason } from '@llmgw/shared';
import type { NewEvent } from './event-log.js';

/** A node credential heard from two places at once, or refused for it (credentials/sightings.ts). */
export interface CredentialEvent {
  reason: CredentialEventReason;
  nodeId: string;
  message: string;
}

/** The Warning a credential conflict is recorded as: `ctl events --node N` shows it. */
export function credentialEvent(e: CredentialEvent): NewEvent {
  return { type: 'Warning', source: 'reconciler', reason: e.reason, object: `node/${e.nodeId}`, nodes: [e.nodeId], message: e.message };
}
