--[[
  The room as it stands now: public info, operator stats and settings in force, after settling
  what elapsed time owes (so asking is enough to move the line; no timer needed).

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)

  Returns the snapshot (flat key/value list, see snapshot in includes/views.lua), or
    -1  unknown event
]]
--- @include "admission"
--- @include "views"

local r = load_room()
if not r then return -1 end
local now = now_ms()
tick(r, now)
save_room(r)
return snapshot(r, now)
