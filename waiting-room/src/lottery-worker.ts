/**
 * The draw's check in a Web Worker, so ranking a membership of many thousands (and sorting it,
 * and hashing it whole for M) never blocks the page: receives a PublishedDraw, posts
 * `{progress: {done, total}}` as the ranking goes and then `{check}` (or `{error}`). Built as
 * its own asset by waiting-room/build.mjs; lottery-model.ts runs the same check in the page when
 * no worker can be had.
 */
import { checkDraw, type PublishedDraw } from "./lottery-recipe.js";

const scope = self as unknown as {
  onmessage: ((event: MessageEvent<PublishedDraw>) => void) | null;
  postMessage(message: unknown): void;
};

scope.onmessage = (event) => {
  // No pauses: nothing else runs on this thread.
  checkDraw(event.data, {
    batch: 1_024,
    pause: () => Promise.resolve(),
    progress: (done, total) => scope.postMessage({ progress: { done, total } }),
  }).then(
    (check) => scope.postMessage({ check }),
    (err: unknown) => scope.postMessage({ error: err instanceof Error ? err.message : String(err) }),
  );
};
