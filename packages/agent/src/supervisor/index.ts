export { Supervisor } from './supervisor.js';
export type { SupervisorOptions } from './options.js';
export { fingerprint } from './converge.js';
export { probeEngine } from './health.js';
