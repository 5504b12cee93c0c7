export * from './cgroup.js';
export * from './fabrics.js';
export * from './meminfo.js';
export * from './nvidia-smi/index.js';
export * from './probe.js';
