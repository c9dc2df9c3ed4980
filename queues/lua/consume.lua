-- consume: pop up to `count` ready jobs from the listed queues, in the listed
-- order, and lease each one in the same step (no window in which a popped job
-- is held by nobody). Paused queues are skipped; expired jobs met on the way are
-- removed, so a stale entry never hides the valid jobs behind it.
--
-- KEYS[7*(i-1)+1 .. 7*i]  the keys of the i-th listed queue (see _job.lua)
-- ARGV[1]  now (ms)
-- ARGV[2]  ttr (ms): the lease
-- ARGV[3]  count (>= 1)
-- Returns: {paused, dues, jobs...}
--   paused  bitmask of listed queues that are paused (bit i-1 for queue i)
--   dues    per listed queue, comma-joined: the new earliest timer (ms) when this
--           consume made it earlier, else -1
--   then 9 fields per leased job: queue index (1-based), then _job.lua job_fields

local now, ttr, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local paused, result, dues, taken = 0, {}, {}, 0

for qi = 1, #KEYS / 7 do
  local base = (qi - 1) * 7
  JOBS, READY, DELAYED, INFLIGHT, EXPIRY, DEAD, META =
    KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4], KEYS[base + 5], KEYS[base + 6], KEYS[base + 7]
  dues[qi] = '-1'
  if redis.call('HEXISTS', META, 'paused') == 1 then
    paused = paused + 2 ^ (qi - 1)
  elseif taken < count then
    local before = next_due()
    local leased = 0
    while taken < count do
      local popped = redis.call('ZPOPMIN', READY)
      if not popped[1] then break end
      local id = popped[1]
      redis.call('ZREM', EXPIRY, id)
      local job = load_job(id)
      if job and is_expired(job, now) then
        redis.call('HDEL', JOBS, id)
      elseif job then
        job.state = STATE_INFLIGHT
        job.tries = job.tries - 1
        job.deliveries = job.deliveries + 1
        store_job(id, job)
        redis.call('ZADD', INFLIGHT, num(now + ttr), id)
        result[#result + 1] = qi
        for _, field in ipairs(job_fields(id, job, now)) do result[#result + 1] = field end
        taken = taken + 1
        leased = leased + 1
      end
    end
    if leased > 0 then
      redis.call('HSET', META, 'last_consume_ms', num(now))
      if before < 0 or now + ttr < before then dues[qi] = num(now + ttr) end
    end
  end
end

local head = {paused, table.concat(dues, ',')}
for _, field in ipairs(result) do head[#head + 1] = field end
return head
