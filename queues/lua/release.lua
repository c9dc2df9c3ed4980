-- release: give an in-flight job back. It becomes ready again after `delay`
-- (at once for 0) and gets back the try its delivery used: a release is not a
-- failure. The notifier also uses it, with backoff delays, to schedule retries.
--
-- KEYS[1..7]  the queue's keys (see _job.lua)
-- ARGV[1]  now (ms)
-- ARGV[2]  job id
-- ARGV[3]  delay (ms)
-- ARGV[4]  ready channel (pub/sub)
-- ARGV[5]  1 to give the try back (API release), 0 to keep it used (a failed delivery)
-- Returns: {0, due}  released; due as in publish.lua
--          {1, 0}    no such in-flight job (unknown, acked, expired or not in flight)

local now, id, delay = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local job = load_job(id)
if not job or job.state ~= STATE_INFLIGHT then return {1, 0} end
if is_expired(job, now) then
  forget_job(id)
  count_total('exp_', 1)
  return {1, 0}
end

local before = next_due()
redis.call('ZREM', INFLIGHT, id)
if ARGV[5] == '1' then job.tries = job.tries + 1 end
count_total('rel_', 1)
local due = -1
if delay > 0 then
  job.state = STATE_DELAYED
  store_job(id, job)
  redis.call('ZADD', DELAYED, num(now + delay), id)
  due = now + delay
else
  make_ready(id, job)
  redis.call('PUBLISH', ARGV[4], 1)
  due = job.expire_at
  if due == 0 then due = -1 end
end
if due >= 0 and (before < 0 or due < before) then return {0, due} end
return {0, -1}
