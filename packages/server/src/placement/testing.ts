import type { Profile } from '@llmgw/shared';
import { makeModel, makeProfile } from '../../test/factories.js';
import type { NodeSnapshot, PlacementOutcome } from '../snapshot.js';
import { place, type PlaceInput } from './index.js';

/** Places one replica of a one-profile model over `nodes`, nothing reserved unless `extra` says. */
export function placeOne(profile: Partial<Profile>, nodes: NodeSnapshot[], extra: Partial<PlaceInput> = {}): PlacementOutcome {
  return place({ model: makeModel({ profiles: [makeProfile(profile)] }), nodes, reservations: [], ...extra });
}
