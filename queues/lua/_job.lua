-- Shared prelude of every per-queue script (scripts.py prepends it).
--
-- KEYS (the same seven for every per-queue script, built by keys.queue_keys):
--   KEYS[1] jobs      hash  job id -> packed job
--   KEYS[2] ready     zset  job id, score (255 - priority) * 2^45 + seq
--   KEYS[3] delayed   zset  job id, score due time (ms)
--   KEYS[4] inflight  zset  job id, score lease expiry (ms)
--   KEYS[5] expiry    zset  ready job id, score ttl expiry (ms)
--   KEYS[6] dead      zset  job id, score seq
--   KEYS[7] meta      hash  seq, created_ms, pause state, last_consume_ms, minute counters,
--                           cumulative totals (count_total)
--
-- A packed job is a fixed header followed by three strings:
--   struct '<BBHHdHB': state, priority, tries left, deliveries, expire_at (ms, 0 = never),
--                      #attributes, #content type
--   then content type, attributes (JSON text or ""), body.
-- Tries and deliveries live here, never in a timer member, so a timer member is
-- just the job id and ack/release/delete can always find and remove it.

local JOBS, READY, DELAYED, INFLIGHT, EXPIRY, DEAD, META = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]

local STATE_DELAYED, STATE_READY, STATE_INFLIGHT, STATE_DEAD = 0, 1, 2, 3
local HEADER = '<BBHHdHB'
local PRIORITY_UNIT = 35184372088832  -- 2^45: seq stays below it, priority above

-- Scores and times go to Redis through this: Lua's default number format keeps
-- only 14 significant digits, too few for ready scores and millisecond times.
local function num(x)
  return string.format('%.0f', x)
end

local function pack_job(job)
  return struct.pack(HEADER, job.state, job.priority, job.tries, job.deliveries, job.expire_at,
    #job.attrs, #job.ctype) .. job.ctype .. job.attrs .. job.body
end

local function decode_job(packed)
  local state, priority, tries, deliveries, expire_at, attrs_len, ctype_len, pos = struct.unpack(HEADER, packed)
  local ctype = string.sub(packed, pos, pos + ctype_len - 1)
  pos = pos + ctype_len
  local attrs = string.sub(packed, pos, pos + attrs_len - 1)
  return {state = state, priority = priority, tries = tries, deliveries = deliveries, expire_at = expire_at,
          ctype = ctype, attrs = attrs, body = string.sub(packed, pos + attrs_len)}
end

-- A job whose bytes do not decode (written by something else, or truncated) is
-- treated as gone rather than failing every script that meets it.
local function unpack_job(packed)
  local ok, job = pcall(decode_job, packed)
  if ok and job.state >= STATE_DELAYED and job.state <= STATE_DEAD then return job end
  return nil
end

local function load_job(id)
  local packed = redis.call('HGET', JOBS, id)
  if not packed then return nil end
  return unpack_job(packed)
end

local function store_job(id, job)
  redis.call('HSET', JOBS, id, pack_job(job))
end

local function is_expired(job, now)
  return job.expire_at > 0 and job.expire_at <= now
end

-- Seconds of life left, as lmstfy reports it (Redis TTL rounding); 0 = never expires.
local function ttl_left(job, now)
  if job.expire_at == 0 then return 0 end
  local left = math.floor((job.expire_at - now + 500) / 1000)
  if left < 1 then return 1 end
  return left
end

local function next_seq()
  return redis.call('HINCRBY', META, 'seq', 1)
end

local function earliest(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if first[2] then return tonumber(first[2]) end
  return nil
end

-- The earliest due time over the three timer sets, or -1 when none.
local function next_due()
  local best = -1
  for _, key in ipairs({DELAYED, INFLIGHT, EXPIRY}) do
    local due = earliest(key)
    if due and (best < 0 or due < best) then best = due end
  end
  return best
end

-- Make a job ready: FIFO within its priority, and its ttl expiry armed.
local function make_ready(id, job)
  job.state = STATE_READY
  store_job(id, job)
  redis.call('ZADD', READY, num((255 - job.priority) * PRIORITY_UNIT + next_seq()), id)
  if job.expire_at > 0 then
    redis.call('ZADD', EXPIRY, num(job.expire_at), id)
  end
end

local function make_dead(id, job)
  job.state = STATE_DEAD
  job.expire_at = 0  -- dead jobs never expire (lmstfy PERSISTs them)
  store_job(id, job)
  redis.call('ZADD', DEAD, num(next_seq()), id)
end

-- Remove every trace of a job. Returns 1 if it existed.
local function forget_job(id)
  redis.call('ZREM', READY, id)
  redis.call('ZREM', DELAYED, id)
  redis.call('ZREM', INFLIGHT, id)
  redis.call('ZREM', EXPIRY, id)
  redis.call('ZREM', DEAD, id)
  return redis.call('HDEL', JOBS, id)
end

-- Cumulative totals in the meta hash: <p>t counts every event of a kind since
-- the queue was created (pub_ published, con_ consumed, ack_ acked, rel_ released,
-- exp_ expired, dead_ dead-lettered, resp_ respawned). /metrics exports them as
-- counters (queues/metrics.py): kept by the scripts themselves, they are exact
-- and the same whichever process or instance reads them.
local function count_total(prefix, n)
  if n > 0 then redis.call('HINCRBY', META, prefix .. 't', n) end
end

-- Per-minute counters in the meta hash, for the admin's rates: <p>m = the minute
-- (ms / 60000) of <p>c, the count in that minute; <p>p = the count in the minute
-- before it. Two fields per counter, whatever the traffic. It also keeps the
-- kind's total (count_total).
local function count_event(prefix, n, now)
  local minute = math.floor(now / 60000)
  local state = redis.call('HMGET', META, prefix .. 'm', prefix .. 'c')
  local at, current = tonumber(state[1]), tonumber(state[2]) or 0
  if at ~= minute then
    local previous = 0
    if at == minute - 1 then previous = current end
    redis.call('HSET', META, prefix .. 'm', num(minute), prefix .. 'p', num(previous), prefix .. 'c', num(n))
  else
    redis.call('HINCRBY', META, prefix .. 'c', n)
  end
  count_total(prefix, n)
end

-- The fields the engine returns for a job, in this order (engine.JobRecord).
local function job_fields(id, job, now)
  return {id, job.body, job.tries, ttl_left(job, now), job.attrs, job.ctype, job.deliveries, job.state}
end
