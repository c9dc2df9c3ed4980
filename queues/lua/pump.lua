-- pump: act on the queue's timers that are due, at most `limit` of them:
--   delayed  -> ready (or removed if its ttl ran out first)
--   inflight -> lease expired: ready again while tries remain, else dead letter
--   expiry   -> a ready job whose ttl ran out: removed
-- The pumper calls it for each queue the timer index says is due, and again
-- while it reports a full batch.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1]  now (ms)
-- ARGV[2]  limit (timers handled per call)
-- ARGV[3]  ready channel (pub/sub)
-- Returns: {handled, readied, dead, expired, next_due}
--   handled   timers acted on (== limit means "call again")
--   next_due  the earliest remaining timer (ms), or -1 when none

local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local handled, readied, buried, expired = 0, 0, 0, 0

local function due_ids(key, room)
  if room <= 0 then return {} end
  return redis.call('ZRANGEBYSCORE', key, '-inf', num(now), 'LIMIT', 0, room)
end

for _, id in ipairs(due_ids(DELAYED, limit)) do
  handled = handled + 1
  redis.call('ZREM', DELAYED, id)
  local job = load_job(id)
  if job and is_expired(job, now) then
    forget_job(id)
    expired = expired + 1
  elseif job then
    make_ready(id, job)
    readied = readied + 1
  end
end

for _, id in ipairs(due_ids(INFLIGHT, limit - handled)) do
  handled = handled + 1
  redis.call('ZREM', INFLIGHT, id)
  local job = load_job(id)
  if job and is_expired(job, now) then
    forget_job(id)
    expired = expired + 1
  elseif job and job.tries > 0 then
    make_ready(id, job)
    readied = readied + 1
  elseif job then
    make_dead(id, job)
    buried = buried + 1
  end
end

for _, id in ipairs(due_ids(EXPIRY, limit - handled)) do
  handled = handled + 1
  forget_job(id)
  expired = expired + 1
end

if readied > 0 then redis.call('PUBLISH', ARGV[3], readied) end
count_total('exp_', expired)
count_total('dead_', buried)
return {handled, readied, buried, expired, next_due()}
