-- index_settle: after pumping claimed queues, record each one's next due time,
-- unless the score moved since the claim (a publish lowered it: keep that).
--
-- KEYS[1]  keys.TIMER_INDEX
-- ARGV[1]  the claim score (ms) given by index_claim
-- ARGV[2], ARGV[3], ...  member, next due (ms; -1 = no timers left) pairs
-- Returns: how many were settled

local claim = tonumber(ARGV[1])
local settled = 0
for i = 2, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == claim then
    if tonumber(ARGV[i + 1]) < 0 then
      redis.call('ZREM', KEYS[1], ARGV[i])
    else
      redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
    end
    settled = settled + 1
  end
end
return settled
