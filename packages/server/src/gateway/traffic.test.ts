import { describe, expect, it } from '@jest/globals';
import { Traffic } from './traffic.js';

describe('Traffic', () => {
  it('gives the controller a copy per pass: counts that move later do not change a snapshot taken', () => {
    const t = new Traffic();
    t.requestStarted('m', 1000);
    t.attemptStarted('r-1', 'm');
    t.waitStarted('cold');
    const snap = t.loadSnapshot();
    t.attemptEnded('r-1');
    t.requestEnded('m');
    t.waitEnded('cold');
    expect([...snap.inFlight]).toEqual([['r-1', 1]]);
    expect(snap.models.get('m')).toEqual({ inFlight: 1, waiting: 0, lastRequestMs: 1000 });
    expect(snap.models.get('cold')).toEqual({ inFlight: 0, waiting: 1 });
    // Once over, the replica leaves the counts; the model keeps its last request for idle scale-down.
    expect([...t.loadSnapshot().inFlight]).toEqual([]);
    expect(t.load('m')).toEqual({ inFlight: 0, waiting: 0, lastRequestMs: 1000 });
  });

  it('keeps the metric label of a replica gone from the fleet while requests are still in flight on it', () => {
    const t = new Traffic();
    t.attemptStarted('r-1', 'm');
    t.attemptStarted('r-2', 'm');
    t.attemptEnded('r-2');
    t.prune(new Set());
    expect(t.inFlightByReplica()).toEqual([{ replica: 'r-1', model: 'm', value: 1 }]);
    t.attemptEnded('r-1');
    t.attemptStarted('r-2', 'other');
    expect(t.inFlightByReplica()).toEqual([{ replica: 'r-2', model: 'other', value: 1 }]);
  });
});
