/**
 * Caps on open Server-Sent Events streams, per client IP and per process. A stream holds a
 * socket and a bounded backlog for as long as the client likes, so without a cap a few hundred
 * clients (or one client opening many) hold the gateway's memory and file descriptors. The count
 * is this process's: each gateway instance caps what it serves.
 *
 * Acquiring is synchronous (one check and one increment in the same turn), so streams opened at
 * the same moment cannot all pass the check before any is counted.
 */
export type StreamSlot = { kind: "open"; release(): void } | { kind: "ip_full" } | { kind: "process_full" };

export interface StreamSlots {
  /** A slot for one stream from `ip`, or which cap refused it. */
  acquire(ip: string): StreamSlot;
  /** Open streams in this process. */
  open(): number;
}

export function createStreamSlots(limits: { maxStreams: number; maxStreamsPerIp: number }): StreamSlots {
  const perIp = new Map<string, number>();
  let open = 0;
  return {
    acquire(ip) {
      // The client's own cap first: an address over it is told so (429) even when the process is full.
      const mine = perIp.get(ip) ?? 0;
      if (mine >= limits.maxStreamsPerIp) return { kind: "ip_full" };
      if (open >= limits.maxStreams) return { kind: "process_full" };
      open++;
      perIp.set(ip, mine + 1);
      let released = false;
      return {
        kind: "open",
        release() {
          if (released) return;
          released = true;
          open--;
          const left = (perIp.get(ip) ?? 1) - 1;
          // Only addresses with an open stream are kept: the map cannot grow with addresses seen.
          if (left <= 0) perIp.delete(ip);
          else perIp.set(ip, left);
        },
      };
    },
    open: () => open,
  };
}
