/**
 * The jest settings every package shares: TypeScript as native ESM through ts-jest, and
 * `./x.js` imports mapped to their `.ts` sources. A package's jest.config.js spreads
 * this and adds only what differs (e2e's timeouts and single worker).
 */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  testMatch: ['<rootDir>/src/**/*.test.ts', '<rootDir>/test/**/*.test.ts'],
  testTimeout: 30000,
};
