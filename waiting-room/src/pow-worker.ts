/**
 * The proof-of-work solver, in a Web Worker so the page stays responsive while it hashes: finds a
 * nonce such that SHA-256(challenge + ":" + nonce) starts with `bits` zero bits (the gateway's
 * check, src/waiting-room/proof-of-work.ts). Posts `{progress: tries}` now and then, and
 * `{nonce}` once found. Built as its own asset by waiting-room/build.mjs.
 */
interface Job {
  challenge: string;
  bits: number;
}

const scope = self as unknown as {
  onmessage: ((event: MessageEvent<Job>) => void) | null;
  postMessage(message: unknown): void;
};

function leadingZeroBits(digest: Uint8Array): number {
  let n = 0;
  for (const byte of digest) {
    if (byte === 0) {
      n += 8;
      continue;
    }
    return n + Math.clz32(byte) - 24;
  }
  return n;
}

const BATCH = 256;

async function solve({ challenge, bits }: Job): Promise<void> {
  const encoder = new TextEncoder();
  for (let i = 0; ; i += BATCH) {
    // A batch of digests in flight at once: WebCrypto's per-call overhead is its promise.
    const nonces = Array.from({ length: BATCH }, (_, j) => (i + j).toString(36));
    const digests = await Promise.all(
      nonces.map((nonce) => crypto.subtle.digest("SHA-256", encoder.encode(`${challenge}:${nonce}`))),
    );
    for (let j = 0; j < BATCH; j++) {
      const digest = digests[j];
      if (digest && leadingZeroBits(new Uint8Array(digest)) >= bits) {
        scope.postMessage({ nonce: nonces[j], tries: i + j + 1 });
        return;
      }
    }
    if ((i / BATCH) % 16 === 0) scope.postMessage({ progress: i + BATCH });
  }
}

scope.onmessage = (event) => {
  void solve(event.data);
};
