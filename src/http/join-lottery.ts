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
const caches = new WeakMap<object, Map<string, Promise<string | undefined>>>();

export async function commitmentAtJoin(
  room: Pick<WaitingRoom, "info">,
  eventId: string,
): Promise<{ commitment: string } | undefined> {
  let cache = caches.get(room);
  if (!cache) {
    cache = new Map();
    caches.set(room, cache);
  }
  let known = cache.get(eventId);
  if (!known) {
    if (cache.size >= MAX_EVENTS) cache.clear();
    const read = room.info(eventId).then(
      (r) => (r.ok ? r.info.lottery.commitment : undefined),
      () => undefined,
    );
    known = read;
    cache.set(eventId, read);
    // Not remembered when it could not be read: the next join asks again.
    void read.then((c) => {
      if (c === undefined && cache.get(eventId) === read) cache.delete(eventId);
    });
  }
  const commitment = await known;
  return commitment === undefined ? undefined : { commitment };
}
