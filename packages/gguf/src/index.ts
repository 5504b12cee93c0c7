export * from './format.js';
export * from './writer.js';
export * from './header.js';
export * from './estimate.js';
export * from './test-model.js';
export * from './source-estimate.js';
export * from './test-lora.js';
