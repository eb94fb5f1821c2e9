--[[
  Create an event's waiting room, or update one that has not opened yet. Idempotent: the same
  arguments again change nothing. The lottery seed, its commitment and the room's epoch are
  stored once, at creation, and never replaced.

  In 'restore' mode (ARGV[9]) the room is created only when it does not exist (Redis lost it and
  the gateway re-creates it from the event stored in DynamoDB); an existing room is left exactly
  as it is, whatever the arguments, so a restore racing an operator's change never undoes it.

  KEYS[1..8]  room, fans, pre, fifo, seen, gone, active, sessions (see includes/room.lua)
  KEYS[9]     changes  STREAM  capped log of settings changes (at, kind, fields)
  ARGV[1]     onSaleAt (ms since the epoch)
  ARGV[2]     admitPerSecond (decimal)
  ARGV[3]     maxActive
  ARGV[4]     sessionSeconds
  ARGV[5]     abandonSeconds
  ARGV[6]     seed (hex), used only when the room is created
  ARGV[7]     commitment = hex SHA-256 of the seed string, stored with the seed
  ARGV[8]     epoch (random id), used only when the room is created
  ARGV[9]     'configure' | 'restore'
  ARGV[10..19] the operator's decisions the room is created with, when this call creates it
              (either mode; an existing room keeps its own): a room Redis lost, or one re-created
              by a PUT, comes back with every decision kept on the stored event, in the same step
              that creates it, so it is never open to bots or reopened in between.
  ARGV[10]    paused '1' | '0'
  ARGV[11]    powBits, ARGV[12] invites '1' | '0': the bot settings (optional)
  ARGV[13..17] autoAdmit '1' | '0', autoMin, autoMax, autoP99Ms, autoThrottles: the admission
              loop's settings (optional, '' = unset)
  ARGV[18]    settingsAt: the version of those settings (optional): update-settings-9.lua's next
              version is above it
  ARGV[19]    closed '1' | '0' (optional): the sale was closed (close-sale)
  ARGV[20]    fanShards: the number of fan shards the room's heartbeats live in (0 or '': none,
              they stay in `seen`), ARGV[21] their tags, comma-separated (placeFanShards in
              src/waiting-room/fan-shards.ts); stored when this call creates the room, never
              changed after
  ARGV[22]    the fan shards' key (16 hex digits; fanShardOf hashes a fan id under it), stored with
              the tags as `fanShardKey`
  ARGV[23]    claims '1' | '0': the cursor offers sessions that the fans claim (room.lua
              claims), stored when this call creates the room, never changed after; '2': and the
              fans' records live on the fan shards (room.lua shard_records), only with shards
              (without, '1')
  ARGV[24..]  fan ids the operator revoked (optional): each gets a revoked record, so it may not
              take a place in the new room

  A room created in 'restore' mode is marked `restoredAt` (ms): it cannot tell a fan it never knew
  from one admitted in the room Redis lost (src/waiting-room/operator.ts revokeFan).

  Returns the snapshot plus 'created' 1|0 and 'changed' 1|0, or
    -5  the room has already opened (its pre-queue is drawn) and the arguments differ
        (never in 'restore' mode)
]]
--- @include "admission"
--- @include "views"

local NAMES = { 'onSaleAt', 'admitPerSecond', 'maxActive', 'sessionSeconds', 'abandonSeconds' }
local restore = ARGV[9] == 'restore'
local now = now_ms()
local created, changed = 0, 0

local r = load_room()
if r and restore then
  tick(r, now)
  save_room(r)
  return append(snapshot(r, now), 'created', '0', 'changed', '0')
end
if not r then
  redis.call('HSET', K_ROOM, 'seed', ARGV[6], 'commitment', ARGV[7], 'epoch', ARGV[8],
    'createdAt', int(now), 'paused', ARGV[10] == '1' and '1' or '0', 'closed', ARGV[19] == '1' and '1' or '0')
  -- absent means off; a restored room states them, as it always did
  if restore or (ARGV[11] and ARGV[11] ~= '' and ARGV[11] ~= '0') or ARGV[12] == '1' then
    redis.call('HSET', K_ROOM, 'powBits', (ARGV[11] and ARGV[11] ~= '') and ARGV[11] or '0',
      'invites', ARGV[12] == '1' and '1' or '0')
  end
  local loop = { 'autoAdmit', 'autoMin', 'autoMax', 'autoP99Ms', 'autoThrottles' }
  for i, name in ipairs(loop) do
    local v = ARGV[12 + i]
    if v and v ~= '' then redis.call('HSET', K_ROOM, name, v) end
  end
  if ARGV[18] and ARGV[18] ~= '' then redis.call('HSET', K_ROOM, 'settingsAt', ARGV[18]) end
  if restore then redis.call('HSET', K_ROOM, 'restoredAt', int(now)) end
  local shards = tonumber(ARGV[20]) or 0
  if shards > 0 and (ARGV[21] or '') ~= '' then
    redis.call('HSET', K_ROOM, 'fanShards', int(shards), 'fanShardTags', ARGV[21])
    if (ARGV[22] or '') ~= '' then redis.call('HSET', K_ROOM, 'fanShardKey', ARGV[22]) end
  end
  if ARGV[23] == '2' and shards > 0 and (ARGV[21] or '') ~= '' then
    redis.call('HSET', K_ROOM, 'claims', '2')
  elseif ARGV[23] == '1' or ARGV[23] == '2' then
    redis.call('HSET', K_ROOM, 'claims', '1')
  end
  for i = 24, #ARGV do
    redis.call('HSETNX', KEYS[2], ARGV[i], 'r|0|0||0|0')
  end
  created = 1
else
  tick(r, now)
  save_room(r)
end

local same = r ~= nil
if r then
  for i, name in ipairs(NAMES) do
    if room_raw(r)[name] ~= ARGV[i] then same = false end
  end
end
if not same then
  if r and r.openedAt > 0 then return -5 end
  local args = {}
  for i, name in ipairs(NAMES) do
    args[#args + 1] = name
    args[#args + 1] = ARGV[i]
  end
  redis.call('HSET', K_ROOM, unpack(args))
  local kind = 'configure'
  if created == 1 then kind = 'create' end
  if created == 1 and restore then kind = 'restore' end
  redis.call('XADD', KEYS[9], 'MAXLEN', '~', '1000', '*', 'at', int(now), 'kind', kind, unpack(args))
  changed = 1
  r = load_room()
  tick(r, now)
  save_room(r)
end

return append(snapshot(r, now), 'created', int(created), 'changed', int(changed))
