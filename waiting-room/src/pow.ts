/**
 * Solving the line's proof-of-work challenge in a Web Worker (pow-worker.ts), so hashing never
 * blocks the page. `progress` is called with the share of the expected work done (0..1; it may
 * pass 1 when luck is poor).
 */
declare const __POW_WORKER__: string;

import type { PowSolver } from "./types.js";

/** The worker's asset, named by the build (relative to the page, as every asset). */
const WORKER_ASSET = typeof __POW_WORKER__ === "string" ? __POW_WORKER__ : "";

export const solveInWorker: PowSolver = (challenge, bits, progress) =>
  new Promise((resolve, reject) => {
    if (!WORKER_ASSET || typeof Worker === "undefined") {
      reject(new Error("this browser cannot run the check"));
      return;
    }
    const worker = new Worker(new URL(`assets/${WORKER_ASSET}`, document.baseURI), { type: "module" });
    const expected = 2 ** bits;
    worker.onmessage = (event: MessageEvent<{ progress?: number; nonce?: string }>) => {
      if (event.data.nonce !== undefined) {
        worker.terminate();
        progress(1);
        resolve(event.data.nonce);
      } else if (event.data.progress !== undefined) {
        progress(event.data.progress / expected);
      }
    };
    worker.onerror = (event) => {
      worker.terminate();
      reject(new Error(event.message || "the check failed"));
    };
    worker.postMessage({ challenge, bits });
  });
