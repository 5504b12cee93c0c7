import { createHash } from 'node:crypto';
import type { Model } from '@llmgw/shared';
import type { CatalogStatusSource } from './watch.js';

/** What `ctl status` shows of an instance's catalog: a digest (to see that instances agree), the count, a failed reload. */
export interface CatalogInfo {
  digest: string;
  models: number;
  error?: string;
}

/**
 * The catalog in force, as a function of now: the digest is worked out again only when
 * the controller's catalog changes (a reload), so this is cheap to call every second.
 */
export function catalogInfo(controller: { readonly models: readonly Model[] }, source?: CatalogStatusSource): () => CatalogInfo {
  let models: unknown;
  let digest = '';
  return () => {
    if (controller.models !== models) {
      models = controller.models;
      digest = createHash('sha256').update(JSON.stringify(controller.models)).digest('hex');
    }
    const failure = source?.failure;
    return { digest, models: controller.models.length, ...(failure ? { error: failure.error.message } : {}) };
  };
}
