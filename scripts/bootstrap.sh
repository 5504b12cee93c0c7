#!/usr/bin/env bash
# Installs what llmgw needs on a machine that has only Node 20 and npm: pnpm itself,
# then the workspace's exact dependencies from the committed lockfile. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PNPM_VERSION=12.4.2
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
  npm install -g "pnpm@$PNPM_VERSION" --loglevel=error
fi
# The dashboard's browser tests drive Debian's Chromium through playwright-core, which
# never downloads a browser of its own.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "bootstrap: /usr/bin/chromium is missing; install Debian's chromium package for the dashboard's browser tests (they are skipped without it outside CI)" >&2
  fi
fi
# The store's tests and the HA journey run a throwaway PostgreSQL cluster per test run
# (scripts/test-postgres/); they need Debian's server binaries, not a running service.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v pg_config >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  else
    echo "bootstrap: PostgreSQL is missing; install Debian's postgresql package for the PostgreSQL store's tests (they are skipped without it outside CI)" >&2
  fi
fi
# better-sqlite3 compiles against Node's own headers when no prebuilt binary can be
# fetched; pnpm's node-gyp only finds them through this variable, and needs a compiler.
missing=""
for tool in python3 make g++; do command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"; done
if [ -n "$missing" ]; then
  echo "bootstrap: missing:$missing; better-sqlite3 compiles with python3, make and g++ when no prebuilt binary can be downloaded (Debian/Ubuntu: apt-get install python3 make g++)" >&2
fi
npm_config_nodedir="$(node -p "require('path').resolve(process.execPath, '../..')")"
export npm_config_nodedir
pnpm install --frozen-lockfile
