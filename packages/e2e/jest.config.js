import base from '../../jest.base.js';

export default {
  ...base,
  testMatch: ['<rootDir>/src/**/*.test.ts'],
  testTimeout: 60000,
  // Journeys start real processes; running them side by side on 2 cores makes
  // timing-sensitive steps (heartbeats, readiness) flaky.
  maxWorkers: 1,
};
