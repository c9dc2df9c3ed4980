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
-- A packed job is an 8-byte header, optional parts, then the body:
--   struct '<BBHI': flags, priority, tries left, expire_at (unix s, 0 = never)
--   flags: bits 0-1 state; bit 2 deliveries follow ('<H'); bit 3 a content type
--   follows ('<B' length + text); bit 4 attributes follow ('<H' length + JSON)
--   then the body (the rest). A just-published job is header + body: kept at 8
--   bytes so a 100-byte body stays in jemalloc's 112-byte size class.
-- Tries and deliveries live here, never in a timer member, so a timer member is
-- just the job id and ack/release/delete can always find and remove it.

local JOBS, READY, DELAYED, INFLIGHT, EXPIRY, DEAD, META = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]

local STATE_DELAYED, STATE_READY, STATE_INFLIGHT, STATE_DEAD = 0, 1, 2, 3
local HAS_DELIVERIES, HAS_CTYPE, HAS_ATTRS = 4, 8, 16
local MAX_EXPIRE_S = 4294967295
local PRIORITY_UNIT = 35184372088832  -- 2^45: seq stays below it, priority above

-- Scores and times go to Redis through this: Lua's default number format keeps
-- only 14 significant digits, too few for ready scores and millisecond times.
local function num(x)
  return string.format('%.0f', x)
end

-- The expiry (ms) of a job given `ttl_s` from `now`: whole seconds (as stored),
-- rounded up so a job never expires early; 0 = never.
local function expiry_after(now, ttl_s)
  if ttl_s <= 0 then return 0 end
  return math.min(math.ceil((now + ttl_s * 1000) / 1000), MAX_EXPIRE_S) * 1000
end

local function pack_job(job)
  local flags, extra = job.state, ''
  local deliveries = math.min(job.deliveries, 65535)
  if deliveries > 0 then flags, extra = flags + HAS_DELIVERIES, extra .. struct.pack('<H', deliveries) end
  if #job.ctype > 0 then flags, extra = flags + HAS_CTYPE, extra .. struct.pack('<B', #job.ctype) .. job.ctype end
  if #job.attrs > 0 then flags, extra = flags + HAS_ATTRS, extra .. struct.pack('<H', #job.attrs) .. job.attrs end
  return struct.pack('<BBHI', flags, job.priority, job.tries, math.floor(job.expire_at / 1000)) .. extra .. job.body
end

local function has(flags, bit)
  return flags % (bit * 2) >= bit
end

local function decode_job(packed)
  local flags, priority, tries, expire_s, pos = struct.unpack('<BBHI', packed)
  local job = {state = flags % 4, priority = priority, tries = tries, expire_at = expire_s * 1000,
               deliveries = 0, ctype = '', attrs = ''}
  if has(flags, HAS_DELIVERIES) then job.deliveries, pos = struct.unpack('<H', packed, pos) end
  if has(flags, HAS_CTYPE) then
    local length
    length, pos = struct.unpack('<B', packed, pos)
    job.ctype, pos = string.sub(packed, pos, pos + length - 1), pos + length
  end
  if has(flags, HAS_ATTRS) then
    local length
    length, pos = struct.unpack('<H', packed, pos)
    job.attrs, pos = string.sub(packed, pos, pos + length - 1), pos + length
  end
  if pos > #packed + 1 then error('truncated job') end
  job.body = string.sub(packed, pos)
  return job
end

-- A job whose bytes do not decode (written by something else, or truncated) is
-- treated as gone rather than failing every script that meets it.
local function unpack_job(packed)
  local ok, job = pcall(decode_job, packed)
  if ok then return job end
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

-- Whole seconds of life left; 0 = never expires. expire_at is rounded up to the
-- second when stored (expiry_after), so rounding down here reports exactly the
-- published ttl right after publishing, as Redis's TTL does for lmstfy.
local function ttl_left(job, now)
  if job.expire_at == 0 then return 0 end
  local left = math.floor((job.expire_at - now) / 1000)
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

-- Batched writes, for scripts that move many jobs: collect, then one variadic
-- call per key (a bulk publish or a pump batch costs a handful of calls, not a
-- handful per job).
local function new_batch()
  return {jobs = {}, ready = {}, expiry = {}, delayed = {}, dead = {}}
end

local function batch_store(batch, id, job)
  local jobs = batch.jobs
  jobs[#jobs + 1] = id
  jobs[#jobs + 1] = pack_job(job)
end

local function batch_ready(batch, id, job)
  job.state = STATE_READY
  batch_store(batch, id, job)
  batch.ready[#batch.ready + 1] = {id, job.priority}
  if job.expire_at > 0 then
    batch.expiry[#batch.expiry + 1] = num(job.expire_at)
    batch.expiry[#batch.expiry + 1] = id
  end
end

local function batch_delayed(batch, id, job, due)
  job.state = STATE_DELAYED
  batch_store(batch, id, job)
  batch.delayed[#batch.delayed + 1] = num(due)
  batch.delayed[#batch.delayed + 1] = id
end

local function batch_dead(batch, id, job)
  job.state = STATE_DEAD
  job.expire_at = 0  -- dead jobs never expire (lmstfy PERSISTs them)
  batch_store(batch, id, job)
  batch.dead[#batch.dead + 1] = id
end

-- Variadic commands in chunks: Lua's unpack() has a limit on its results.
local function call_chunked(command, key, args)
  for first = 1, #args, 4000 do
    local last = math.min(first + 3999, #args)
    redis.call(command, key, unpack(args, first, last))
  end
end

local function flush(batch)
  if #batch.jobs > 0 then call_chunked('HSET', JOBS, batch.jobs) end
  local ordered = #batch.ready + #batch.dead
  if ordered > 0 then
    -- seqs in batch order: FIFO within a priority, oldest dead first
    local seq = redis.call('HINCRBY', META, 'seq', ordered) - ordered
    local ready, dead = {}, {}
    for _, entry in ipairs(batch.ready) do
      seq = seq + 1
      ready[#ready + 1] = num((255 - entry[2]) * PRIORITY_UNIT + seq)
      ready[#ready + 1] = entry[1]
    end
    for _, id in ipairs(batch.dead) do
      seq = seq + 1
      dead[#dead + 1] = num(seq)
      dead[#dead + 1] = id
    end
    if #ready > 0 then call_chunked('ZADD', READY, ready) end
    if #dead > 0 then call_chunked('ZADD', DEAD, dead) end
  end
  if #batch.expiry > 0 then call_chunked('ZADD', EXPIRY, batch.expiry) end
  if #batch.delayed > 0 then call_chunked('ZADD', DELAYED, batch.delayed) end
end

-- Make a job ready: FIFO within its priority, and its ttl expiry armed.
local function make_ready(id, job)
  local batch = new_batch()
  batch_ready(batch, id, job)
  flush(batch)
end

local function make_dead(id, job)
  local batch = new_batch()
  batch_dead(batch, id, job)
  flush(batch)
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
