import { runTestEngineCli } from './cli.js';

runTestEngineCli(process.argv.slice(2));
