// The server's layers, bottom first: the one list the lint's folder rule is generated
// from (eslint.config.js) and the server README's diagram draws. A file may import its
// own folder and the layers below its own, never a peer on its row or anything above;
// so no two folders can import each other. A new folder or top-level file needs its row
// here (layers.test.ts fails until it has one).
export const SERVER_LAYERS = [
  ['src/bucket-histogram.ts'],
  [
    'src/errors.ts',
    'src/domain.ts',
    'src/snapshot.ts',
    'src/report-values.ts',
    'src/version.ts',
    'src/metrics.ts',
    'test/temp-dirs.ts',
    'test/postgres.ts',
    'test/cluster-child.ts',
  ],
  ['src/http', 'src/tls', 'test/factories.ts'],
  ['src/files', 'src/store'],
  ['src/placement', 'src/inventory.ts', 'test/credentials.ts', 'test/cluster-tables.ts'],
  ['src/reconcile', 'src/estimates.ts', 'src/catalog'],
  ['src/controller'],
  ['src/events', 'src/credentials'],
  ['src/gateway'],
  ['src/api'],
  ['src/dashboard'],
  ['src/cluster', 'src/settings.ts'],
  ['src/server.ts'],
  ['src/main.ts', 'test/live-server.ts'],
  ['test'],
];
