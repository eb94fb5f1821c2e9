--[[
  Claims an event's current sample slot for the calling process (src/stats/sampler.ts): of all the
  gateway processes ticking, exactly one takes each slot, so the history holds one sample per
  slot however many gateways run. The slot is read from Redis time, the one clock every process
  shares: two processes whose clocks disagree still agree on the slot.

  KEYS[1]  st:{evt:E}:slot   string: the last slot claimed (slot number = Redis ms / ARGV[1])
  ARGV[1]  the slot length, ms (the sample interval)

  Returns  {1, now} when this call claimed the slot it falls in (now: Redis ms, the sample's
           time); {0, now} when that slot was claimed already
]]
--- @include "now-ms"

local now = now_ms()
local length = tonumber(ARGV[1])
local slot = math.floor(now / length)
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if slot <= last then
  return {0, now}
end
-- Kept a few slots: a key that lapsed only means nobody claimed a slot for that long.
redis.call('SET', KEYS[1], slot, 'PX', length * 4)
return {1, now}
