--[[
  Change operator settings; they apply from this instant on every gateway at once. Budget owed
  for the time before the change is settled at the old settings first, so a new admitPerSecond
  is never applied retroactively (and time spent paused never accrues).

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  KEYS[9]     changes  STREAM  capped log of settings changes (at, kind, fields)
  ARGV        name, value pairs; names among admitPerSecond, maxActive, sessionSeconds,
              abandonSeconds, paused (0|1), closed (0|1), powBits (0..26), invites (0|1); values
              validated by the caller.
              The pair `by`, <operator name> is not a setting: it is kept in the log entry.

  The log entry (XADD) has, for every field changed, `<name>` the new value and `<name>.was` the
  old one, and `by` when given: the settings history says what each change was and who made it.

  Returns the snapshot plus 'changed' <number of fields changed>, or
    -1  unknown event
]]
--- @include "admission"
--- @include "views"

local EDITABLE = { admitPerSecond = true, maxActive = true, sessionSeconds = true,
  abandonSeconds = true, paused = true, closed = true, powBits = true, invites = true }

local r = load_room()
if not r then return -1 end
local now = now_ms()
tick(r, now)
save_room(r)

local args, logged, changed = {}, {}, 0
local by
for i = 1, #ARGV - 1, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if name == 'by' then
    by = value
  elseif EDITABLE[name] and r.raw[name] ~= value then
    args[#args + 1] = name
    args[#args + 1] = value
    logged[#logged + 1] = name
    logged[#logged + 1] = value
    logged[#logged + 1] = name .. '.was'
    logged[#logged + 1] = r.raw[name] or ''
    changed = changed + 1
  end
end
if by then
  logged[#logged + 1] = 'by'
  logged[#logged + 1] = by
end

if changed > 0 then
  redis.call('HSET', K_ROOM, unpack(args))
  redis.call('XADD', KEYS[9], 'MAXLEN', '~', '1000', '*', 'at', int(now), 'kind', 'settings', unpack(logged))
  r = load_room()
  -- accrual up to `now` is done, so this only admits what the new settings allow at once
  -- (e.g. more room under a higher maxActive)
  tick(r, now)
  save_room(r)
end

return append(snapshot(r, now), 'changed', int(changed))
