--[[
  The token bucket (used by rate-limit-1, and by waiting-room/status-10, join-9 and join-batch-n,
  which check a request's limits in the same call as the line so a poll is one round trip). One
  algorithm in Lua; src/http/middleware/rate-limit.ts has the same one in memory for when Redis is
  away.

  key     the bucket: a string "<tokens> <ts ms>", expired once it would have refilled. A string
          read by GET and written by one SET ... PX, not a hash (HMGET, HSET, PEXPIRE): a new
          client's bucket was most of a join's Redis cost (bench:redis-instructions). The keys
          were renamed with the change (rl: -> lim:), so a gateway of the previous version, which
          reads a hash, never meets one of these (during a rolling upgrade each version counts its
          own buckets)
  rate    tokens added per second (> 0)
  burst   bucket capacity (>= 1)
  cost    tokens this request takes (usually 1)
  now     Redis time in ms (redis.call('TIME'), taken by the caller)

  take_token(key, rate, burst, cost, now)
    Returns  allowed (1 | 0), retryAfterMs (0 when allowed, else ms until enough tokens exist)
  take_tokens(key, rate, burst, count, now)
    `count` requests of cost 1 at once (a batch of joins from one client IP, in arrival order):
    what `count` calls of take_token in a row would answer, with one read and one write.
    Returns  allowed (how many of the first requests got a token, 0..count), retryAfterMs for
             the rest (0 when all were allowed)
  take_tokens_batch(keys, keyBase, m, rates, bursts, settingOf, counts, now)
    take_tokens for m buckets at once (join-batch-n.lua: a batch of joins from many client IPs):
    bucket b is keys[keyBase + b], its limit rates[k] and bursts[k] with k = settingOf[b] (no
    settingOf: k = 1 for all), counts[b] requests. The same answers as m calls of take_tokens,
    with one MGET for all and one SET each, each limit's PX and each whole number of tokens
    formatted once: a crowd joins from as many addresses as fans, and each take_tokens was a GET,
    a SET and three formats (bench:redis-instructions, "each from its own IP")
    Returns  allowed[b], retryAfterMs[b] (tables indexed by bucket)
]]
-- The tokens in a bucket whose state (its string; false or nil: none) was read now.
local function bucket_tokens(state, rate, burst, now)
  if not state then return burst end
  local tokens, ts = string.match(state, '^(%S+) (%d+)$')
  tokens, ts = tonumber(tokens), tonumber(ts)
  -- unreadable (never written so): a full bucket, as a missing one
  if tokens == nil or ts == nil then return burst end
  return math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
end

local function bucket_refilled(key, rate, burst, now)
  return bucket_tokens(redis.call('GET', key), rate, burst, now)
end

local function bucket_save(key, rate, burst, tokens, now)
  -- A whole number of tokens (a new client's bucket less its first request) is written with %d:
  -- glibc's %.17g costs several times more, and a rush is mostly new clients.
  local state
  if tokens == math.floor(tokens) then
    state = string.format('%d %d', tokens, now)
  else
    state = string.format('%.17g %d', tokens, now)
  end
  -- A full bucket carries no information: let it go once it would have refilled. PX as text:
  -- redis.call formats a Lua number with %.17g, several times the cost of %d.
  redis.call('SET', key, state, 'PX', string.format('%d', math.ceil(burst * 1000 / rate) + 1000))
end

local function take_token(key, rate, burst, cost, now)
  local tokens = bucket_refilled(key, rate, burst, now)
  local allowed, retry = 0, 0
  if tokens >= cost then
    tokens = tokens - cost
    allowed = 1
  else
    retry = math.ceil((cost - tokens) * 1000 / rate)
  end
  bucket_save(key, rate, burst, tokens, now)
  return allowed, retry
end

local function take_tokens(key, rate, burst, count, now)
  local tokens = bucket_refilled(key, rate, burst, now)
  local allowed = math.min(count, math.floor(tokens))
  tokens = tokens - allowed
  local retry = 0
  if allowed < count then retry = math.ceil((1 - tokens) * 1000 / rate) end
  bucket_save(key, rate, burst, tokens, now)
  return allowed, retry
end

local function take_tokens_batch(keys, keyBase, m, rates, bursts, settingOf, counts, now)
  local states = redis.call('MGET', unpack(keys, keyBase + 1, keyBase + m))
  local nowText = string.format('%d', now)
  -- the text of a whole number of tokens, formatted once a call (most buckets are new: burst - count)
  local texts = {}
  local allowed, retry = {}, {}
  local setting, rate, burst, pxText = 0, 0, 0, nil
  for b = 1, m do
    local k = settingOf and settingOf[b] or 1
    if k ~= setting then
      setting, rate, burst = k, rates[k], bursts[k]
      pxText = string.format('%d', math.ceil(burst * 1000 / rate) + 1000)
    end
    local tokens = bucket_tokens(states[b], rate, burst, now)
    local count = counts[b]
    local a = math.min(count, math.floor(tokens))
    tokens = tokens - a
    allowed[b] = a
    retry[b] = a < count and math.ceil((1 - tokens) * 1000 / rate) or 0
    local text
    if tokens == math.floor(tokens) then
      text = texts[tokens]
      if not text then
        text = string.format('%d', tokens)
        texts[tokens] = text
      end
    else
      text = string.format('%.17g', tokens)
    end
    -- as bucket_save writes it
    redis.call('SET', keys[keyBase + b], text .. ' ' .. nowText, 'PX', pxText)
  end
  return allowed, retry
end
