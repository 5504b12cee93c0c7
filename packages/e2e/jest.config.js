export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
  testMatch: ['<rootDir>/src/**/*.test.ts'],
  testTimeout: 60000,
  // Journeys start real processes; running them side by side on 2 cores makes
  // timing-sensitive steps (heartbeats, readiness) flaky.
  maxWorkers: 1,
};
