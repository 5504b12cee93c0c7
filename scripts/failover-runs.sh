#!/usr/bin/env bash
# Issue 28's failover figures: N runs (default 5) of two llmgw-server instances on one
# throwaway PostgreSQL, each instance SIGKILLed in turn under steady load through the
# other; prints the failed requests per kill and run. Runs the built dist: pnpm build first.
set -euo pipefail
cd "$(dirname "$0")/../packages/e2e"
LLMGW_FAILOVER_RUNS="${1:-5}" exec node --experimental-vm-modules --no-warnings=ExperimentalWarning \
  ../../node_modules/jest/bin/jest.js src/failover-runs.test.ts
