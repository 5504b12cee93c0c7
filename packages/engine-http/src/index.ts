// OpenAI's response shapes and the request parameter checks are namespaces
// (`openai.chatChunk`, `params.checkModel`), so a handler says which one it uses.
export * as openai from './openai.js';
export * as params from './params.js';
export * from './backend.js';
export * from './cli.js';
export * from './errors.js';
export * from './flags.js';
export * from './json.js';
export * from './request.js';
export * from './server.js';
export * from './sse.js';
