--[[
  Open the room now (operator or test): moves onSaleAt to this instant if the pre-queue has not
  been drawn yet, then draws it. Idempotent: on an open room it changes nothing.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  KEYS[9]     changes  STREAM  capped log of settings changes (at, kind, fields)

  Returns the snapshot plus 'changed' 1|0, or
    -1  unknown event
]]
--- @include "admission"
--- @include "views"

local r = load_room()
if not r then return -1 end
local now = now_ms()
tick(r, now)

local changed = 0
if r.openedAt == 0 then
  redis.call('HSET', K_ROOM, 'onSaleAt', int(now))
  redis.call('XADD', KEYS[9], 'MAXLEN', '~', '1000', '*', 'at', int(now), 'kind', 'open',
    'onSaleAt', int(now))
  r.onSaleAt = now
  room_raw(r).onSaleAt = int(now)
  tick(r, now)
  changed = 1
end

save_room(r)
return append(snapshot(r, now), 'changed', int(changed))
