import { HttpProxyAgent, HttpsProxyAgent } from 'hpagent';
import type { Agents } from 'got';
import { getProxyForUrl } from 'proxy-from-env';

/**
 * The proxy for fetching a model file from `url`: `LLMGW_HTTP_PROXY` when set (a proxy
 * for model downloads alone, for every http(s) source), else the standard `HTTPS_PROXY`,
 * `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY` (lower case too), read by proxy-from-env as
 * curl reads them. `llmgw://` sources go to the llmgw server like every other call of the
 * agent, never through a proxy. Undefined: connect directly.
 */
export function proxyFor(url: string): string | undefined {
  const own = process.env.LLMGW_HTTP_PROXY?.trim();
  if (own) return own;
  return getProxyForUrl(url) || undefined;
}

/** got's agents for a request through `proxy` (hpagent, which got's documentation points to: keep-alive, CONNECT tunnels). */
export function proxyAgents(proxy: string): Agents {
  const options = { proxy, keepAlive: true };
  return { http: new HttpProxyAgent(options), https: new HttpsProxyAgent(options) };
}
