import { MAX_MODEL_NAME } from '../catalog/loaded.js';
import type { Controller } from '../controller/controller.js';
import { DomainError, echo } from '../errors.js';

/** A name over MAX_MODEL_NAME is never a model: no lookup, and no suggestion (edit distance grows with the name). */
export function resolveModel(ctl: Controller, nameOrAlias: string): string {
  const m = nameOrAlias.length <= MAX_MODEL_NAME ? ctl.catalogView.resolve(nameOrAlias) : undefined;
  if (m) return m.name;
  const close = nameOrAlias.length <= MAX_MODEL_NAME ? ctl.catalogView.suggest(nameOrAlias) : [];
  throw new DomainError('model_not_found', `model "${echo(nameOrAlias)}" is not in the catalog${close.length ? ` (did you mean ${close.join(', ')}?)` : ''}`, {
    field: 'model',
  });
}
