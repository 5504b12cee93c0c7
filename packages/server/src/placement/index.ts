/** Placement's public API: callers import from here, never from the step files. */
export { place, placeMany, placeOnFleet } from './place.js';
export type { PlaceInput, PlaceManyInput, PlaceManyResult, PlaceOptions, PlacementRequest } from './place.js';
export { prepareFleet, reserve } from './fleet.js';
export type { Fleet } from './fleet.js';
export { DEFAULT_POOL } from './requirement.js';
export { addReservation, indexReservations, reservationsFor, reservationsOf, reservedMemoryMb } from './reservations.js';
export type { NodeUsage, ReservationIndex } from './reservations.js';
export { reasonCounts, renderRejection, summarize } from './summary.js';
export type { ProfileTally, ReasonCount } from './summary.js';
