import { Type, type Static } from '@sinclair/typebox';

/** One problem of a catalog file, where it is and what is wrong (the server's `CatalogError`). */
export const CatalogProblemViewSchema = Type.Object({
  /** The whole line an operator reads: `catalog c.yaml: model "m" (line 7): profiles[0].engine must be …`. */
  message: Type.String(),
  file: Type.String(),
  model: Type.Optional(Type.String()),
  field: Type.Optional(Type.String()),
  line: Type.Optional(Type.Integer()),
  problem: Type.String(),
});
export type CatalogProblemView = Static<typeof CatalogProblemViewSchema>;

/**
 * `GET /api/v1/catalog`: the catalog in force and, while the latest reload of its file
 * failed, that failure; a good reload clears it. `ctl models` and the dashboard's models
 * page show the failure above the models, which are still the previous catalog's.
 */
export const CatalogStatusViewSchema = Type.Object({
  /** The catalog file; absent when the server runs without `--catalog`. */
  file: Type.Optional(Type.String()),
  models: Type.Integer(),
  /** When the catalog in force was loaded (ISO 8601). */
  loaded_at: Type.Optional(Type.String()),
  reload_error: Type.Optional(
    Type.Object({
      /** When the reload failed (ISO 8601), and how many seconds ago by the server's clock. */
      at: Type.String(),
      age_s: Type.Integer(),
      /** Every problem found, in file order, at most 20. */
      problems: Type.Array(CatalogProblemViewSchema),
      /** Problems beyond those listed. */
      more: Type.Integer(),
    }),
  ),
});
export type CatalogStatusView = Static<typeof CatalogStatusViewSchema>;
