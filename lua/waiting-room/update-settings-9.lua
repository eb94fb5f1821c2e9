--[[
  Change operator settings; they apply from this instant on every gateway at once. Budget owed
  for the time before the change is settled at the old settings first, so a new admitPerSecond
  is never applied retroactively (and time spent paused never accrues).

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  KEYS[9]     changes  STREAM  capped log of settings changes (at, kind, fields)
  ARGV        name, value pairs; names among admitPerSecond, maxActive, sessionSeconds,
              abandonSeconds, paused (0|1), closed (0|1), powBits (0..26), invites (0|1), and the
              closed loop's autoAdmit (0|1), autoMin, autoMax, autoP99Ms, autoThrottles; values
              validated by the caller.
              The pair `by`, <operator name> is not a setting: it is kept in the log entry.
              The pair `loop`, '1' marks the admission loop's own step (src/stats/loop.ts): it
              changes admitPerSecond only while autoAdmit is on (else nothing), and is logged only
              when the rate moved at least 10% (and 1/s) from the rate last logged for the loop
              (`autoLogged`), so the loop's steps do not flood the log (every step is in the
              stats sample instead).

  The log entry (XADD) has, for every field changed, `<name>` the new value and `<name>.was` the
  old one, and `by` when given: the settings history says what each change was and who made it.

  A change also sets `settingsAt`, the settings' version (the snapshot carries it); so does an
  operator's call that changes nothing (not the loop's): the gateway keeps the settings on the
  event after every operator call, and a new version lets that copy replace one that did not land.

  Returns the snapshot plus 'changed' <number of fields changed>, or
    -1  unknown event
    -10 admitPerSecond given while autoAdmit is on and stays on (the loop owns the rate); nothing
        changed
    -11 autoMin would exceed autoMax (given or stored; absent: 0 and 100000); nothing changed
]]
--- @include "admission"
--- @include "views"

local EDITABLE = { admitPerSecond = true, maxActive = true, sessionSeconds = true,
  abandonSeconds = true, paused = true, closed = true, powBits = true, invites = true,
  autoAdmit = true, autoMin = true, autoMax = true, autoP99Ms = true, autoThrottles = true }

local r = load_room()
if not r then return -1 end

local given, order, by, loop = {}, {}, nil, false
for i = 1, #ARGV - 1, 2 do
  local name, value = ARGV[i], ARGV[i + 1]
  if name == 'by' then
    by = value
  elseif name == 'loop' then
    loop = value == '1'
  elseif EDITABLE[name] and given[name] == nil then
    given[name] = value
    order[#order + 1] = name
  end
end
local function after(name, default)
  return tonumber(given[name] or room_raw(r)[name] or default) or default
end
local loop_on = (room_raw(r).autoAdmit or '0') == '1'
if loop then
  -- the loop's step sets the rate only, and only while the loop is on
  if not loop_on or given.admitPerSecond == nil then
    return append(snapshot(r, now_ms()), 'changed', '0')
  end
  order = { 'admitPerSecond' }
else
  if given.admitPerSecond ~= nil and loop_on and after('autoAdmit', 0) == 1 then return -10 end
  if after('autoMin', 0) > after('autoMax', 100000) then return -11 end
end

local now = now_ms()
tick(r, now)
save_room(r)

local args, logged, changed = {}, {}, 0
for _, name in ipairs(order) do
  local value = given[name]
  if room_raw(r)[name] ~= value then
    args[#args + 1] = name
    args[#args + 1] = value
    logged[#logged + 1] = name
    logged[#logged + 1] = value
    logged[#logged + 1] = name .. '.was'
    logged[#logged + 1] = room_raw(r)[name] or ''
    changed = changed + 1
  end
end
if by then
  logged[#logged + 1] = 'by'
  logged[#logged + 1] = by
end

-- The loop's steps are logged when the rate has moved enough since the last one logged; any
-- other change of the rate is logged, and the loop measures from it.
local log = changed > 0
if changed > 0 and given.admitPerSecond ~= nil and room_raw(r).admitPerSecond ~= given.admitPerSecond then
  if loop then
    local was = tonumber(room_raw(r).autoLogged or room_raw(r).admitPerSecond) or 0
    log = math.abs(tonumber(given.admitPerSecond) - was) >= math.max(1, 0.1 * was)
  end
  if log then
    args[#args + 1] = 'autoLogged'
    args[#args + 1] = given.admitPerSecond
  end
end

if changed == 0 and not loop and #order > 0 then
  redis.call('HSET', K_ROOM, 'settingsAt', int(math.max(now, (tonumber(room_raw(r).settingsAt) or 0) + 1)))
  r = load_room()
end
if changed > 0 then
  -- The settings' version: strictly rising per room, and from the clock, so that it keeps rising
  -- past a room restored after a Redis loss (restore brings back the version kept outside). The
  -- copy kept in DynamoDB is written only by a newer version (src/inventory/events.ts).
  args[#args + 1] = 'settingsAt'
  args[#args + 1] = int(math.max(now, (tonumber(room_raw(r).settingsAt) or 0) + 1))
  redis.call('HSET', K_ROOM, unpack(args))
  if log then
    redis.call('XADD', KEYS[9], 'MAXLEN', '~', '1000', '*', 'at', int(now), 'kind', 'settings', unpack(logged))
  end
  r = load_room()
  -- accrual up to `now` is done, so this only admits what the new settings allow at once
  -- (e.g. more room under a higher maxActive)
  tick(r, now)
  save_room(r)
end

return append(snapshot(r, now), 'changed', int(changed))
