#!/usr/bin/env bash
# A sketch, not the product: what a join would cost Redis under step 2 of docs/redis-cluster.md
# ("Steps 2 and 3: the line's records off the event's slot"), in instructions, as
# `npm run bench:redis-instructions` counts today's join. The two Lua calls below are the design's
# two join calls reduced to their Redis work (no limits, no reshard or epoch answers beyond one
# check, no pre-queue): the event's slot reserves a range of places for a batch, and each fan
# shard writes its fans' records (HSETNX with the reserved place) and beats.
#
#   bash scripts/sketches/step2-join-cost.sh     # needs valgrind, redis-server and redis-cli
#
# Prints instructions per call for each phase (20 calls each; a redis-cli connection per call, so
# `ping` is the per-call floor to subtract). The shard's hash and zset hold 10,000 fans first, so
# neither is in its small (listpack) encoding, whose linear search a line of thousands never has.
set -euo pipefail
PORT=${SKETCH_PORT:-6498}
dir=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT
cd "$dir"
valgrind --tool=callgrind --callgrind-out-file="$dir/out.%p" redis-server --port "$PORT" --save '' \
  --appendonly no >"$dir/log" 2>&1 &
server=$!
until redis-cli -p "$PORT" ping >/dev/null 2>&1; do sleep 0.5; done
cli() { redis-cli -p "$PORT" "$@"; }

cli hset 'wr:{evt:E}:room' tail 100000 served 5000 epoch abc fanShards 12 closed 0 paused 0 drawn 1 \
  openedAt 1 >/dev/null
cli eval "for i = 1, 10000 do
  local id = 'pre-' .. i .. '-abcdefghijklmnopqrstuvwxyz012345'
  redis.call('HSET', KEYS[1], id, 'w|' .. i .. '|0||0|0')
  redis.call('ZADD', KEYS[2], 1700000000000 + i, id)
end return 1" 2 'wr:{s1}:fans' 'wr:{s1}:beats' >/dev/null

# The event's slot: the room read and one range of places for n fans; no argument a fan. ARGV[3..]:
# places an earlier batch reserved and did not use (a fan already in line), vacated.
event_slot='local v = redis.call("HMGET", KEYS[1], "closed", "paused", "epoch", "served", "drawn", "openedAt", "fanShards")
if v[3] ~= ARGV[2] then return { "reshard" } end
local n = tonumber(ARGV[1])
local last = redis.call("HINCRBY", KEYS[1], "tail", n)
if #ARGV > 2 then
  local g = {}
  for i = 3, #ARGV do g[#g + 1] = ARGV[i]; g[#g + 1] = ARGV[i] end
  redis.call("ZADD", KEYS[2], unpack(g))
end
return { last - n + 1, v[4] }'
# A fan shard: each fan's record with its reserved place, unless the fan has one (then the record
# is answered and the place goes back), and every fan's beat.
shard='local t = redis.call("TIME")
local now = string.format("%d", t[1] * 1000 + math.floor(t[2] / 1000))
local out, beats = {}, { "GT" }
for i = 1, #ARGV, 2 do
  local fan = ARGV[i]
  if redis.call("HSETNX", KEYS[1], fan, "w|" .. ARGV[i + 1] .. "|0||0|0") == 1 then
    out[#out + 1] = 0
  else
    out[#out + 1] = redis.call("HGET", KEYS[1], fan)
  end
  beats[#beats + 1] = now
  beats[#beats + 1] = fan
end
redis.call("ZADD", KEYS[2], unpack(beats))
return out'
event_sha=$(cli script load "$event_slot")
shard_sha=$(cli script load "$shard")

run=0
measure() {
  local name=$1 per=$2
  shift 2
  sleep 0.3
  callgrind_control -z "$server" >/dev/null
  for _ in $(seq 1 20); do
    run=$((run + 1))
    "$@" >/dev/null
  done
  callgrind_control -d "$server" >/dev/null
  local file total
  file=$(ls -t "$dir"/out.* | head -1)
  total=$(grep -m1 '^summary' "$file" | cut -d' ' -f2)
  echo "$name: $((total / 20)) instructions a call ($per fans a call)"
}
fans() { # n fans of this run: id place id place ...
  local n=$1 i
  for i in $(seq 1 "$n"); do printf 'f%s-%s-abcdefghijklmnopqrstuvwxyz012345 %s ' "$run" "$i" "$((200000 + run * 100 + i))"; done
}
measure "ping (the per-call floor)" 0 cli ping
measure "event's slot: a range of places" 32 cli evalsha "$event_sha" 2 'wr:{evt:E}:room' 'wr:{evt:E}:gone' 32 abc
shard_call() { # shellcheck disable=SC2046
  cli evalsha "$shard_sha" 2 'wr:{s1}:fans' 'wr:{s1}:beats' $(fans "$1")
}
measure "a shard: records and beats" 3 shard_call 3
measure "a shard: records and beats" 32 shard_call 32
