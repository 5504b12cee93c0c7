/** The supervisor and the two helpers the rest of the agent may use; see ../../README.md for the steps. */
export { Supervisor } from './supervisor.js';
export type { SupervisorOptions } from './options.js';
export { fingerprint } from './converge.js';
export { probeEngine } from './health.js';
