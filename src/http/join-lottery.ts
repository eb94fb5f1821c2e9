/**
 * The lottery commitment a join answers with (issue 29 item 1): the fan's page keeps the one it saw
 * when it joined, and its verify page checks the revealed seed against that one, not against
 * whatever the gateway serves later (a rewritten seed and commitment would pass that check).
 *
 * A commitment never changes once made (it is kept in DynamoDB), so each process reads it once per
 * event, with the room's info, and answers every later join from memory: a join stays one Redis
 * call. A join whose commitment could not be read answers without it (the page then records the
 * info's).
 */
import type { WaitingRoom } from "../waiting-room/index.js";

const MAX_EVENTS = 1_000;

interface Cache {
  /** Reads in flight, and those that found a commitment (kept: it never changes). */
  reads: Map<string, Promise<string | undefined>>;
  /** The commitments read: answered without a promise (a join's answer waits for nothing more). */
  known: Map<string, { commitment: string }>;
}
const caches = new WeakMap<object, Cache>();

export function commitmentAtJoin(
  room: Pick<WaitingRoom, "info">,
  eventId: string,
): { commitment: string } | undefined | Promise<{ commitment: string } | undefined> {
  let cache = caches.get(room);
  if (!cache) {
    cache = { reads: new Map(), known: new Map() };
    caches.set(room, cache);
  }
  const known = cache.known.get(eventId);
  if (known) return known;
  let read = cache.reads.get(eventId);
  if (!read) {
    if (cache.reads.size >= MAX_EVENTS) {
      cache.reads.clear();
      cache.known.clear();
    }
    const reads = cache.reads;
    const answers = cache.known;
    const reading = room.info(eventId).then(
      (r) => (r.ok ? r.info.lottery.commitment : undefined),
      () => undefined,
    );
    read = reading;
    reads.set(eventId, reading);
    // Not remembered when it could not be read: the next join asks again.
    void reading.then((c) => {
      if (reads.get(eventId) !== reading) return;
      if (c === undefined) reads.delete(eventId);
      else answers.set(eventId, { commitment: c });
    });
  }
  return read.then((c) => (c === undefined ? undefined : { commitment: c }));
}
