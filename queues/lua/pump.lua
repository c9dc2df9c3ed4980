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

local batch = new_batch()

-- Take up to `room` due timers of `key` off it; return their ids and jobs (nil
-- for a job that is gone or does not decode: its bytes are dropped).
local function take_due(key, room)
  if room <= 0 then return {}, {} end
  local ids = redis.call('ZRANGEBYSCORE', key, '-inf', num(now), 'LIMIT', 0, room)
  if #ids == 0 then return ids, {} end
  redis.call('ZREM', key, unpack(ids))
  local jobs = {}
  for i, packed in ipairs(redis.call('HMGET', JOBS, unpack(ids))) do
    jobs[i] = packed and unpack_job(packed)
    if packed and not jobs[i] then redis.call('HDEL', JOBS, ids[i]) end
  end
  handled = handled + #ids
  return ids, jobs
end

local function expire(id)
  forget_job(id)
  expired = expired + 1
end

local ids, jobs = take_due(DELAYED, limit)
for i, id in ipairs(ids) do
  local job = jobs[i]
  if job and is_expired(job, now) then
    expire(id)
  elseif job then
    batch_ready(batch, id, job)
    readied = readied + 1
  end
end

ids, jobs = take_due(INFLIGHT, limit - handled)
for i, id in ipairs(ids) do
  local job = jobs[i]
  if job and is_expired(job, now) then
    expire(id)
  elseif job and job.tries > 0 then
    batch_ready(batch, id, job)
    readied = readied + 1
  elseif job then
    batch_dead(batch, id, job)
    buried = buried + 1
  end
end

ids = take_due(EXPIRY, limit - handled)
for _, id in ipairs(ids) do expire(id) end

flush(batch)
if readied > 0 then redis.call('PUBLISH', ARGV[3], readied) end
count_total('exp_', expired)
count_total('dead_', buried)
return {handled, readied, buried, expired, next_due()}
