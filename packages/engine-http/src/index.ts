export * from './backend.js';
export * from './errors.js';
export * from './json.js';
export * from './openai.js';
export * from './params.js';
export * from './request.js';
export * from './server.js';
export * from './sse.js';
