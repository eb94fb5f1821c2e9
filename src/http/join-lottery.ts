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

type Known = { commitment: string } | undefined;
/** Per room, per event: the commitment once read (answered without a promise), or its read in flight. */
const caches = new WeakMap<object, Map<string, { commitment: string } | Promise<Known>>>();

export function commitmentAtJoin(room: Pick<WaitingRoom, "info">, eventId: string): Known | Promise<Known> {
  let cache = caches.get(room);
  if (!cache) {
    cache = new Map();
    caches.set(room, cache);
  }
  const kept = cache.get(eventId);
  if (kept) return kept;
  if (cache.size >= MAX_EVENTS) cache.clear();
  const events = cache;
  const read: Promise<Known> = room.info(eventId).then(
    (r) => {
      const commitment = r.ok ? r.info.lottery.commitment : undefined;
      return commitment === undefined ? undefined : { commitment };
    },
    () => undefined,
  );
  events.set(eventId, read);
  // Once read, kept as the value; not remembered when it could not be read: the next join asks again.
  void read.then((known) => {
    if (events.get(eventId) !== read) return;
    if (known) events.set(eventId, known);
    else events.delete(eventId);
  });
  return read;
}
