--[[
  The room as it stands now: public info, operator stats and settings in force, after settling
  what elapsed time owes (so asking is enough to move the line; no timer needed).

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)

  Returns the snapshot (flat key/value list, see snapshot in includes/views.lua) and
  'awaitingSweep' 1 when a room with fan shards admits nobody until its sweep of lost places
  completes (includes/admission.lua sweep_lagging), or
    -1  unknown event
]]
--- @include "admission"
--- @include "views"

local r = load_room()
if not r then return -1 end
local now = now_ms()
tick(r, now)
save_room(r)
return append(snapshot(r, now), 'awaitingSweep', sweep_lagging(r, now) and '1' or '0')
