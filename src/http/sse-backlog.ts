/**
 * One Server-Sent Events connection's outgoing frames, with a bounded backlog.
 *
 * Hono's `stream.write` resolves only once the socket takes the bytes (the node adapter waits for
 * `drain` before it reads the next chunk), so a client that stops reading leaves a write pending
 * forever. Seat changes keep coming meanwhile; chained behind that write, each one was held in
 * memory (100,000 changes: about 17 MiB of heap per stalled connection). Here frames wait in one
 * queue, written as one chunk per turn, and that queue is bounded:
 *
 * - once `maxBacklogBytes` are queued, the queue is dropped and nothing more is queued until the
 *   pending write completes; then `resyncFrame` is written (a `ready` with `resumed: true`: read
 *   the seat map again, as after a Redis loss) and frames flow again. A slow client loses events,
 *   never correctness: the page re-reads the map on a resumed ready. The check comes before a
 *   message is queued, and one relay message (one section's changes of one apply, which may be a
 *   sweep of thousands of seats) is queued whole, so a large message alone never resyncs a client
 *   that keeps up; only more than the bound arriving while a write is pending does;
 * - a write that does not complete within `writeTimeoutMs` ends the connection (`close`): the
 *   client is not reading at all, and its EventSource reconnects (a fresh `ready`) if it is alive.
 *
 * So a connection holds at most `maxBacklogBytes` plus one message queued, and one chunk of that
 * size in flight, plus the socket's own buffers.
 */
export interface SseSink {
  /** Resolves when the transport took the chunk (for hono's stream: when the socket drained). */
  write(chunk: string): Promise<unknown>;
  /** Ends the connection now, whatever is pending. */
  close(): void;
}

export interface SseBacklogOptions {
  maxBacklogBytes: number;
  writeTimeoutMs: number;
  /** Written once the connection drains after its backlog overflowed. */
  resyncFrame: string;
  /** Queued bytes went up (positive) or down (negative): for the backlog gauge. */
  onBacklog?: (deltaBytes: number) => void;
  /** The backlog overflowed (`resync`), or a write timed out and the connection was ended (`closed`). */
  onOverflow?: (action: "resync" | "closed") => void;
}

export interface SseBacklog {
  /** Queues frames: one message, kept whole (dropped while an overflow waits for its resync, or after `stop`). */
  send(frames: string): void;
  /** Starts writing: `first` goes out before everything queued so far. */
  start(first: string): void;
  /** Forgets everything queued; nothing more is written. */
  stop(): void;
}

export function createSseBacklog(sink: SseSink, options: SseBacklogOptions): SseBacklog {
  let queue: string[] = [];
  let queuedBytes = 0;
  let started = false;
  let writing = false;
  let overflowed = false;
  let stopped = false;

  const take = (): string => {
    const chunk = queue.join("");
    options.onBacklog?.(-queuedBytes);
    queue = [];
    queuedBytes = 0;
    return chunk;
  };

  /** The write, or false when it did not complete in time. */
  const writeInTime = (chunk: string): Promise<boolean> =>
    new Promise((resolve) => {
      const timer = setTimeout(() => resolve(false), options.writeTimeoutMs);
      sink.write(chunk).then(
        () => {
          clearTimeout(timer);
          resolve(true);
        },
        () => {
          clearTimeout(timer);
          resolve(true);
        },
      );
    });

  const pump = async () => {
    writing = true;
    try {
      while (!stopped) {
        let chunk: string;
        if (overflowed) {
          // Everything since the overflow was dropped; what is queued after this goes out after it.
          overflowed = false;
          chunk = options.resyncFrame;
        } else if (queue.length > 0) {
          chunk = take();
        } else {
          return;
        }
        if (!(await writeInTime(chunk))) {
          if (stopped) return;
          options.onOverflow?.("closed");
          stop();
          sink.close();
          return;
        }
      }
    } finally {
      writing = false;
    }
  };

  const stop = () => {
    stopped = true;
    if (queuedBytes > 0) take();
  };

  return {
    send(frames) {
      if (stopped || overflowed) return;
      if (queuedBytes >= options.maxBacklogBytes) {
        overflowed = true;
        take();
        options.onOverflow?.("resync");
        if (started && !writing) void pump();
        return;
      }
      const bytes = Buffer.byteLength(frames);
      queue.push(frames);
      queuedBytes += bytes;
      options.onBacklog?.(bytes);
      if (started && !writing) void pump();
    },
    start(first) {
      if (started || stopped) return;
      started = true;
      // An overflow before the start needs no resync: the first ready tells the client to read the map.
      overflowed = false;
      queue.unshift(first);
      const bytes = Buffer.byteLength(first);
      queuedBytes += bytes;
      options.onBacklog?.(bytes);
      if (!writing) void pump();
    },
    stop,
  };
}
