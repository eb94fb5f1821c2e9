/**
 * The waiting room's script family: each script is a file in lua/waiting-room/ named
 * `<name>-<numberOfKeys>.lua`, with lua/waiting-room/includes/ inlined, read and registered by
 * the one loader (src/redis/scripts.ts), which checks the key count of every call.
 */
import { scriptFamily } from "../redis/scripts.js";

export const waitingRoomScripts = scriptFamily({
  name: "waiting-room",
  files: {
    configure: "waiting-room/configure-9",
    join: "waiting-room/join-9",
    joinBatch: "waiting-room/join-batch-n",
    status: "waiting-room/status-10",
    lineView: "waiting-room/line-view-8",
    snapshot: "waiting-room/snapshot-8",
    updateSettings: "waiting-room/update-settings-9",
    openNow: "waiting-room/open-now-9",
    endSession: "waiting-room/end-session-8",
    lotteryPage: "waiting-room/lottery-page-8",
    lotteryDrawn: "waiting-room/lottery-drawn-8",
    sessionActive: "waiting-room/session-active-3",
    // the fan shards' sweep (fan-sweep.ts), for rooms with fanShards (docs/redis-cluster.md)
    abandon: "waiting-room/abandon-8",
    // a room whose records live on the fan shards (`claims` 2; docs/redis-cluster.md "Steps 2 and
    // 3, call by call"): the event's slot's half
    range: "waiting-room/line-range-8",
    claims: "waiting-room/claims-9",
    statusShard: "waiting-room/status-shard-11",
  },
  readOnly: ["sessionActive"],
});

export type ScriptName = keyof typeof waitingRoomScripts.files;
