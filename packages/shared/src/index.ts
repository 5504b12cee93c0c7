export * from './agent.js';
export * from './views.js';
export * from './catalog.js';
export * from './validate.js';
export * from './units.js';
export type { Static, TSchema } from '@sinclair/typebox';
export * from './keys.js';
export * from './errors.js';
export * from './redact.js';
