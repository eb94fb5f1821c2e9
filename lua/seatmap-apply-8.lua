--[[
  Applies seat changes of one section to its cached seat map (write-through after DynamoDB
  answered, or from the cache-refresh worker) and publishes them to every gateway instance.
  While a fill of the section is open (seatmap-fill-begin-2), the changes also go to its journal,
  for the fill to replay.

  KEYS[1]  sm:{evt:E}:sec:S:st    status chars (see seatmap-load-7.lua)
  KEYS[2]  sm:{evt:E}:sec:S:idx   seat id -> position
  KEYS[3]  sm:{evt:E}:sec:S:exp   held seat id -> hold expiry ms
  KEYS[4]  sm:{evt:E}:sec:S:meta  gen, v, ids, total
  KEYS[5]  sm:{evt:E}:avail       section id -> available count
  KEYS[6]  seatmap:{evt:E}        pub/sub channel of the event's seat changes (a key: on a cluster
                                  it is a shard channel of the event's slot)
  KEYS[7]  sm:{evt:E}:sec:S:jr    stream, the section's journal
  KEYS[8]  sm:{evt:E}:sec:S:fill  string, present while a fill is open

  ARGV[1]  section id
  ARGV[2]  the fill window, ms (as given to seatmap-fill-begin-2)
  ARGV[3]  PUBLISH (one server) or SPUBLISH (a cluster: sharded pub/sub, served by the slot's
           own shard); the relay subscribes with the matching kind (src/seatmap/relay.ts)
  ARGV[4..] triples: seat id, status (available | held | sold), hold expiry ms (0 when not held)

  Returns  the new version, or 0 when the section is not cached (nothing to update; the next
           read loads it from DynamoDB) — the change is still published for live viewers.
  A sold seat never goes back: a late 'available' or 'held' for a seat cached as sold is ignored.
]]
--- @include "now-ms"
--- @include "seat-change"

local cached = redis.call('EXISTS', KEYS[4]) == 1
local journaling = redis.call('EXISTS', KEYS[8]) == 1
local keys = { st = KEYS[1], idx = KEYS[2], exp = KEYS[3] }
local published = {}
local journal = {}
local delta = 0

local publish = ARGV[3] == 'SPUBLISH' and 'SPUBLISH' or 'PUBLISH'
for i = 4, #ARGV, 3 do
  local id, status, expiry = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local c = seatCode[status]
  if c then
    local applied, d = true, 0
    if cached then applied, d = seatChange(keys, id, c, expiry) end
    if applied then
      delta = delta + d
      published[#published + 1] = { id = id, status = status }
    end
    if journaling then
      journal[#journal + 1] = id
      journal[#journal + 1] = status
      journal[#journal + 1] = expiry
    end
  end
end

local version = 0
if cached then
  version = redis.call('HINCRBY', KEYS[4], 'v', 1)
  if delta ~= 0 then redis.call('HINCRBY', KEYS[5], ARGV[1], delta) end
end
if #journal > 0 then
  local window = tonumber(ARGV[2])
  local now = now_ms()
  -- A fill older than the window is refused (seatmap-load-7), so no fill needs older entries.
  redis.call('XADD', KEYS[7], 'MINID', '~', now - window, '*', 'c', cjson.encode(journal))
  redis.call('PEXPIRE', KEYS[7], 2 * window)
end
if #published > 0 then
  redis.call(publish, KEYS[6], cjson.encode(published))
end
return version
