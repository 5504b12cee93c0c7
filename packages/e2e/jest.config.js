import base from '../../jest.base.js';

export default {
  ...base,
  testMatch: ['<rootDir>/src/**/*.test.ts'],
  testTimeout: 60000,
  // Journeys start real processes; running them side by side on 2 cores makes
  // timing-sensitive steps (heartbeats, readiness) flaky.
  maxWorkers: 1,
  // One throwaway PostgreSQL cluster per run, for the journeys with several server
  // instances on one database (src/postgres.ts makes a database per journey in it).
  globalSetup: '../../scripts/test-postgres/global-setup.mjs',
  globalTeardown: '../../scripts/test-postgres/global-teardown.mjs',
};
