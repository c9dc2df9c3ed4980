-- index_claim: take up to `limit` queues whose earliest timer is due, for one
-- pumper, by moving their index score to the end of a lease. Two pumpers never
-- get the same queue; a pumper that dies leaves it to be claimed again when the
-- lease ends.
--
-- KEYS[1]  keys.TIMER_INDEX  zset "ns/q" -> earliest due time (ms)
-- ARGV[1]  now (ms)
-- ARGV[2]  lease (ms)
-- ARGV[3]  limit
-- Returns: the claimed members

local now, lease = tonumber(ARGV[1]), tonumber(ARGV[2])
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%.0f', now), 'LIMIT', 0, tonumber(ARGV[3]))
local claim = string.format('%.0f', now + lease)
for _, member in ipairs(members) do
  redis.call('ZADD', KEYS[1], 'XX', claim, member)
end
return members
