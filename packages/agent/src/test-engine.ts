import { runTestEngineCli } from './test-engine/cli.js';

runTestEngineCli(process.argv.slice(2));
