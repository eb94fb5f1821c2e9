--[[
  The per-IP join limit of a room with fan shards, taken on a fan shard's slot instead of the
  event's (src/waiting-room/fan-shards.ts `joinBuckets`). A crowd joins from about as many
  addresses as fans, and a bucket a fan was about 40% of a join's instructions on the event's
  master (bench:redis-instructions, "each from its own IP"): with the buckets on the shards, the
  event's master keeps only the places, and the buckets spread over the masters as the beats do.
  A bucket goes to shard bucketShardOf(its event-slot key) of the room (one of its first four
  shards, so a batch makes few calls), and every gateway takes one
  client IP's joins from the same bucket; the caller sends each shard its buckets in one call,
  before the batch's beats and places, and leaves the refused fans out of both.

  KEYS[1..m]   the buckets, all of one shard's tag (`wr:{<tag>}:lim:ip:join:<subject>`)
  ARGV[1]      m
  ARGV[2]      s (nLimits), the distinct limits among them
  ARGV[3..2+2s] each limit's rate (tokens/s, > 0) and burst
  then         when s > 1, m: each bucket's limit (1..s), in KEYS order
  then         m: how many joins of the batch want a token of each bucket, in KEYS order

  Returns { allowed 1, retryAfterMs 1, ..., allowed m, retryAfterMs m }: as take_tokens for each
  bucket (the first `allowed` of its joins, in arrival order, got a token; the rest are refused
  and told to retry after that many ms), the same algorithm and bucket format as join-batch-n.lua.
]]
--- @include "now-ms"
--- @include "token-bucket"

local m, nLimits = tonumber(ARGV[1]), tonumber(ARGV[2])
local rates, bursts, settingOf = {}, {}, nil
for k = 1, nLimits do
  rates[k], bursts[k] = tonumber(ARGV[1 + 2 * k]), tonumber(ARGV[2 + 2 * k])
end
local at = 3 + 2 * nLimits
if nLimits > 1 then
  settingOf = {}
  for b = 1, m do settingOf[b] = tonumber(ARGV[at + b - 1]) end
  at = at + m
end
local counts = {}
for b = 1, m do counts[b] = tonumber(ARGV[at + b - 1]) end

local allowed, retry = take_tokens_batch(KEYS, 0, m, rates, bursts, settingOf, counts, now_ms())
local out = {}
for b = 1, m do
  out[2 * b - 1] = allowed[b]
  out[2 * b] = retry[b]
end
return out
