--[[
  Releases the shield's intent leases of one hold attempt, once DynamoDB has answered.

  KEYS[1..]  lease:{evt:E}:<seatId>
  ARGV[1]    lease owner; a lease now owned by another attempt is left alone

  Returns    the number of leases released
]]
local released = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    redis.call('DEL', KEYS[i])
    released = released + 1
  end
end
return released
