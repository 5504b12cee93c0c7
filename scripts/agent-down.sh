#!/usr/bin/env bash
# Issue 28's silent-agent figures: two agents with an engine each under steady load, one
# agent SIGKILLed and kept down N seconds (default 60) under the server's default
# --not-ready-after (15 s) and --lost-after (300 s), then its engine SIGKILLed; prints
# the requests sent, failed while the agent was down, and failed after the engine kill
# against the requests in flight at the kill. Runs the built dist: pnpm build first.
set -euo pipefail
cd "$(dirname "$0")/../packages/e2e"
LLMGW_AGENT_DOWN_S="${1:-60}" exec node --experimental-vm-modules --no-warnings=ExperimentalWarning \
  ../../node_modules/jest/bin/jest.js src/silent-agent.test.ts
