// jest globalTeardown: stops and removes the cluster globalSetup started.
export default async function globalTeardown() {
  await globalThis.__llmgwPostgres?.stop();
}
