--[[
  Is this admitted session still active (not expired, completed or revoked)? Read-only; the
  one Redis round trip that claim paths add to the signature check of an access token.

  A token names the room epoch it was issued in. If this room has another epoch (it was created
  again after Redis lost its data) or there is no room at all, this Redis cannot know the session:
  the answer is "undecided" and the caller trusts the token (signature and expiry), as it does
  while Redis is down. Within the same epoch an unknown or ended session is refused, so a token
  replayed after its session ended (a purchase, a revocation, the expiry) stays refused.
  Across epochs one thing is known: a fan the operator revoked has a revoked record in the new
  room too (the restore writes one per revocation kept in DynamoDB), so a token of that fan from
  the lost room is refused.

  KEYS[1]  room    HASH  the event's waiting room (only its `epoch` field is read)
  KEYS[2]  active  ZSET  sessionId -> expiry (ms)
  KEYS[3]  fans    HASH  fanId -> place record (only its state letter is read; includes/fans.lua)
  ARGV[1]  sessionId
  ARGV[2]  the token's epoch ('' for a token issued by a room without one)
  ARGV[3]  'epoch' to compare epochs as above; 'strict' to answer from this room whatever the
           epoch (a room that does not exist counts as ended)
  ARGV[4]  the token's fan id ('' or absent: not checked)

  Returns 1 active, 0 not (unknown in this epoch, ended, past its expiry, or the fan revoked),
          2 undecided: another epoch, 3 undecided: no room
          (named in the waiting room's code table, src/waiting-room/codes.ts SESSION_ANSWERS)
]]
--- @include "now-ms"

if ARGV[3] == 'epoch' then
  if redis.call('EXISTS', KEYS[1]) == 0 then return 3 end
  local epoch = redis.call('HGET', KEYS[1], 'epoch') or ''
  if epoch ~= ARGV[2] then
    local fanId = ARGV[4] or ''
    if fanId ~= '' and string.sub(redis.call('HGET', KEYS[3], fanId) or '', 1, 2) == 'r|' then return 0 end
    return 2
  end
end
local exp = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]))
if not exp then return 0 end
local now = now_ms()
if exp > now then return 1 end
return 0
