--[[
  A fan's place and what it means now; counts as the poll that keeps the place.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/core.lua)
  ARGV[1]     fanId

  Returns the fan view (flat key/value list, see fan_view), or
    -1  unknown event
    -2  the fan never joined this event
]]
--- @include "core"

local fanId = ARGV[1]
local r = load_room()
if not r then return -1 end
local now = now_ms()
tick(r, now)

local f = get_fan(fanId)
if not f then
  save_room(r)
  return -2
end
settle_fan(r, fanId, f, now)
if f.s == 'p' or f.s == 'w' then redis.call('ZADD', K_SEEN, int(now), fanId) end

save_room(r)
return fan_view(r, fanId, f, now)
