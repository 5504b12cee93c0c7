// proxy-from-env 2 ships no types; this is its one export (see its README).
declare module 'proxy-from-env' {
  /** The proxy URL for `url` from the *_PROXY and NO_PROXY variables, or '' for none. */
  export function getProxyForUrl(url: string | URL): string;
}
