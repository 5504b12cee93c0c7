import { runNodeLlamaCppEngine } from './node-llama-cpp/cli.js';

await runNodeLlamaCppEngine(process.argv.slice(2));
