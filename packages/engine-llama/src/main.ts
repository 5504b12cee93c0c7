import { runNodeLlamaCppEngine } from './cli.js';

await runNodeLlamaCppEngine(process.argv.slice(2));
