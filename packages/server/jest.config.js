import base from '../../jest.base.js';

export default {
  ...base,
  // One throwaway PostgreSQL cluster per run, for the store tests that run on both engines.
  globalSetup: '../../scripts/test-postgres/global-setup.mjs',
  globalTeardown: '../../scripts/test-postgres/global-teardown.mjs',
};
