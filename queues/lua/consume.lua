-- consume: pop up to `count` ready jobs from the listed queues, in the listed
-- order, and lease each one in the same step (no window in which a popped job
-- is held by nobody). Paused queues are skipped; expired jobs met on the way are
-- removed, so a stale entry never hides the valid jobs behind it.
--
-- KEYS[7*(i-1)+1 .. 7*i]  the keys of the i-th listed queue (see _job.lua)
-- ARGV[1]  now (ms)
-- ARGV[2]  ttr (ms): the lease
-- ARGV[3]  count (>= 1)
-- ARGV[4]  max in flight per queue (0 = no cap): push delivery's concurrency,
--          enforced here so it holds across every notifier process
-- ARGV[5]  rate per second per queue (0 = no limit): a token bucket in the meta hash
-- ARGV[6]  '1' to keep tries (push delivery counts attempts, not tries), else ''
-- Returns: {paused, dues, jobs...}
--   paused  bitmask of listed queues that are paused (bit i-1 for queue i)
--   dues    per listed queue, comma-joined: the new earliest timer (ms) when this
--           consume made it earlier, else -1
--   then 9 fields per leased job: queue index (1-based), then _job.lua job_fields

local now, ttr, count = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_inflight, rate, keep_tries = tonumber(ARGV[4] or 0), tonumber(ARGV[5] or 0), ARGV[6] == '1'
local paused, result, dues, taken = 0, {}, {}, 0
-- Expired or corrupt entries removed per queue and call at most: the pump removes them
-- too, so this only bounds the work of one consume after a pump outage.
local MAX_SKIPPED = 1000

-- How many jobs this queue may hand out now, under its cap and its rate.
local function room()
  local allowed = count - taken
  if max_inflight > 0 then
    allowed = math.min(allowed, max_inflight - redis.call('ZCARD', INFLIGHT))
  end
  if rate > 0 then
    local burst = math.max(rate, 1)  -- a rate under 1/s still lets one job through
    local state = redis.call('HMGET', META, 'rate_tokens', 'rate_at')
    local tokens, at = tonumber(state[1]) or burst, tonumber(state[2]) or now
    tokens = math.min(burst, tokens + (now - at) * rate / 1000)
    redis.call('HSET', META, 'rate_tokens', tostring(tokens), 'rate_at', num(now))
    allowed = math.min(allowed, math.floor(tokens))
  end
  return allowed
end

local function spend_rate(leased)
  if rate > 0 and leased > 0 then
    redis.call('HINCRBYFLOAT', META, 'rate_tokens', -leased)
  end
end

for qi = 1, #KEYS / 7 do
  local base = (qi - 1) * 7
  JOBS, READY, DELAYED, INFLIGHT, EXPIRY, DEAD, META =
    KEYS[base + 1], KEYS[base + 2], KEYS[base + 3], KEYS[base + 4], KEYS[base + 5], KEYS[base + 6], KEYS[base + 7]
  dues[qi] = '-1'
  if redis.call('HEXISTS', META, 'paused') == 1 then
    paused = paused + 2 ^ (qi - 1)
  elseif taken < count then
    local leased, expired, skipped, limit = 0, 0, 0, room()
    local stores, leases = {}, {}
    while leased < limit and skipped < MAX_SKIPPED do
      local popped = redis.call('ZPOPMIN', READY, limit - leased)
      if #popped == 0 then break end
      local ids = {}
      for i = 1, #popped, 2 do ids[#ids + 1] = popped[i] end
      redis.call('ZREM', EXPIRY, unpack(ids))
      for i, packed in ipairs(redis.call('HMGET', JOBS, unpack(ids))) do
        local id, job = ids[i], packed and unpack_job(packed)
        if not job or is_expired(job, now) then
          -- expired, or bytes that do not decode as a job: dropped, never served
          if packed then redis.call('HDEL', JOBS, id) end
          skipped = skipped + 1
          if job then expired = expired + 1 end
        else
          job.state = STATE_INFLIGHT
          -- A job released without its try back (a failed delivery) can be ready
          -- with 0 tries left: keep 0, never -1 (it would pack as 65535 tries).
          if job.tries > 0 and not keep_tries then job.tries = job.tries - 1 end
          job.deliveries = job.deliveries + 1
          stores[#stores + 1] = id
          stores[#stores + 1] = pack_job(job)
          leases[#leases + 1] = num(now + ttr)
          leases[#leases + 1] = id
          result[#result + 1] = qi
          for _, field in ipairs(job_fields(id, job, now)) do result[#result + 1] = field end
          taken = taken + 1
          leased = leased + 1
        end
      end
    end
    local before = -1
    if leased > 0 then
      before = next_due()  -- the earliest timer before these leases
      redis.call('HSET', JOBS, unpack(stores))
      redis.call('ZADD', INFLIGHT, unpack(leases))
    end
    spend_rate(leased)
    count_total('exp_', expired)
    if leased > 0 then
      redis.call('HSET', META, 'last_consume_ms', num(now))
      count_event('con_', leased, now)
      if before < 0 or now + ttr < before then dues[qi] = num(now + ttr) end
    end
  end
end

local head = {paused, table.concat(dues, ',')}
for _, field in ipairs(result) do head[#head + 1] = field end
return head
