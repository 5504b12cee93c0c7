import { describe, expect, it } from '@jest/globals';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findEnginePrograms } from './engine-programs.js';

const packages = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

describe('findEnginePrograms', () => {
  it("finds the engines through their packages' bin", () => {
    expect(findEnginePrograms()).toEqual(
      new Map([
        ['llmgw-test-engine', path.join(packages, 'test-engine/dist/main.js')],
        ['node-llama-cpp-engine', path.join(packages, 'engine-llama/dist/main.js')],
      ]),
    );
  });

  it('leaves out an engine that is not installed', () => {
    expect(findEnginePrograms(['@llmgw/no-such-engine', '@llmgw/test-engine'])).toEqual(
      new Map([['llmgw-test-engine', path.join(packages, 'test-engine/dist/main.js')]]),
    );
  });
});
