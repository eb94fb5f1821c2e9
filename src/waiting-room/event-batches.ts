/**
 * One queue per event whose requests go to Redis in batches, one batch in flight at a time: the
 * requests that arrive while an event's batch is in Redis wait, and when it returns the queue goes
 * as the next batch (at most `maxBatch`). A request that finds the event idle waits one turn of the
 * event loop (setImmediate, so the requests parsed in the same turn go together); one that finds no
 * batch in flight while the event is busy (a batch sent within BUSY_MS) lingers up to `lingerMs`
 * for others, until `lingerFull` have come. The queue is first in, first out and Redis runs one
 * event's batches in the order they are sent, so the line's order is the order the process
 * received the requests.
 *
 * Both join paths are batched by it: join-batch.ts (join-batch-n.lua on the event's slot) and
 * shard-joins.ts (a range of places, then the fans' records on their shards). What a batch does is
 * the caller's `send`, which settles every request of the batch it is given.
 */

/** A request in a batch: `send` resolves or rejects each one. */
export interface Waiting<Request, Answer> {
  request: Request;
  resolve(answer: Answer): void;
  reject(err: unknown): void;
}

export interface BatchCounters {
  batches: number;
  joins: number;
  largest: number;
}

export interface EventBatchOptions<Context, Request, Answer> {
  /**
   * Sends one batch of an event with the context its latest request brought, and settles each of
   * its requests. A rejection rejects those it left unsettled.
   */
  send(eventId: string, context: Context, batch: Waiting<Request, Answer>[]): Promise<void>;
  /** Requests in one batch at most. */
  maxBatch: number;
  /** How long a request waits for others while the event is busy (0: never). */
  lingerMs?: number;
  /** A lingering batch goes at once when it has this many requests. */
  lingerFull?: number;
  /** Told every batch's size as it is sent (the gateway's metric). */
  onBatch?: (size: number) => void;
}

export interface EventBatches<Context, Request, Answer> {
  /** Queues the request for its event's next batch; `context` is what that batch is sent with. */
  push(eventId: string, context: Context, request: Request): Promise<Answer>;
  /** Batches sent, requests in them and the largest batch, since the process started. */
  counters(): BatchCounters;
}

/** An event is busy (a request lingers for others) while its last batch went within this. */
const BUSY_MS = 50;
/** Events whose queues are kept (an idle one only remembers when it last sent) before idle ones go. */
const EVENTS_KEPT = 1_000;

interface EventQueue<Context, Request, Answer> {
  context: Context;
  queue: Waiting<Request, Answer>[];
  sending: boolean;
  scheduled: boolean;
  /** When this event's last batch was sent (performance.now()). */
  sentAt: number;
  /** The linger's timer while a batch waits for more requests. */
  linger: ReturnType<typeof setTimeout> | undefined;
}

export function createEventBatches<Context, Request, Answer>(
  options: EventBatchOptions<Context, Request, Answer>,
): EventBatches<Context, Request, Answer> {
  const { send: sendBatch, maxBatch, lingerMs = 0, lingerFull = 1, onBatch } = options;
  const events = new Map<string, EventQueue<Context, Request, Answer>>();
  const counters: BatchCounters = { batches: 0, joins: 0, largest: 0 };

  const send = (eventId: string, q: EventQueue<Context, Request, Answer>): void => {
    q.scheduled = false;
    if (q.linger !== undefined) {
      clearTimeout(q.linger);
      q.linger = undefined;
    }
    if (q.sending || q.queue.length === 0) return;
    const batch = q.queue.splice(0, maxBatch);
    q.sending = true;
    q.sentAt = performance.now();
    counters.batches += 1;
    counters.joins += batch.length;
    counters.largest = Math.max(counters.largest, batch.length);
    onBatch?.(batch.length);
    let sent: Promise<void>;
    try {
      sent = sendBatch(eventId, q.context, batch);
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent
      // (a request settled already ignores the second settling)
      .catch((err: unknown) => {
        for (const w of batch) w.reject(err);
      })
      .finally(() => {
        q.sending = false;
        // What arrived during the round trip is the next batch: no wait.
        send(eventId, q);
      });
  };

  return {
    push(eventId, context, request) {
      let q = events.get(eventId);
      if (!q) {
        if (events.size >= EVENTS_KEPT) forgetIdle(events);
        q = {
          context,
          queue: [],
          sending: false,
          scheduled: false,
          sentAt: Number.NEGATIVE_INFINITY,
          linger: undefined,
        };
        events.set(eventId, q);
      } else q.context = context;
      const queue = q;
      return new Promise<Answer>((resolve, reject) => {
        queue.queue.push({ request, resolve, reject });
        if (queue.sending) return;
        if (!queue.scheduled) {
          queue.scheduled = true;
          if (lingerMs > 0 && lingerFull > 1 && performance.now() - queue.sentAt < BUSY_MS) {
            queue.linger = setTimeout(() => send(eventId, queue), lingerMs);
          } else {
            setImmediate(() => send(eventId, queue));
          }
        } else if (queue.linger !== undefined && queue.queue.length >= lingerFull) {
          // Full enough: the rest of the linger would only delay these requests. The next turn of
          // the event loop, so the requests parsed in this one still go together.
          clearTimeout(queue.linger);
          queue.linger = undefined;
          setImmediate(() => send(eventId, queue));
        }
      });
    },
    counters: () => ({ ...counters }),
  };
}

function forgetIdle<C, R, A>(events: Map<string, EventQueue<C, R, A>>): void {
  for (const [eventId, q] of events) {
    if (!q.sending && !q.scheduled && q.queue.length === 0) events.delete(eventId);
  }
}
