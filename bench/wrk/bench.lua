-- Load script for wrk, driven by bench/loadgen.py through the environment:
--   BENCH_MODE          "static" (the same request again and again) or
--                       "consume_ack" (GET consume; each job got is then acked with DELETE)
--   BENCH_METHOD        request method of the static request
--   BENCH_BODY_FILE     file holding the request body (optional)
--   BENCH_TOKEN         X-Token header (optional)
--   BENCH_CONTENT_TYPE  Content-Type header (optional)
--   BENCH_ACK_PREFIX    "/api/ns/q" for the acks of consume_ack
-- Prints one line "BENCH_JSON {...}" with totals over every wrk thread.

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

-- Each wrk thread runs this file in its own Lua state: these are per-thread counters.
ok, bad, acked = 0, 0, 0
local mode = os.getenv("BENCH_MODE") or "static"
local pending = {}

local function read_file(path)
  local file = assert(io.open(path, "rb"))
  local data = file:read("*a")
  file:close()
  return data
end

wrk.method = os.getenv("BENCH_METHOD") or "GET"
local body_file = os.getenv("BENCH_BODY_FILE") or ""
if body_file ~= "" then wrk.body = read_file(body_file) end
local token = os.getenv("BENCH_TOKEN") or ""
if token ~= "" then wrk.headers["X-Token"] = token end
local content_type = os.getenv("BENCH_CONTENT_TYPE") or ""
if content_type ~= "" then wrk.headers["Content-Type"] = content_type end

if mode == "consume_ack" then
  local ack_prefix = os.getenv("BENCH_ACK_PREFIX")
  -- Acks first: a job is acked by whichever connection of this thread is free next.
  request = function()
    local id = table.remove(pending)
    if id then return wrk.format("DELETE", ack_prefix .. "/job/" .. id) end
    return wrk.format("GET")
  end
end

function response(status, headers, body)
  if status >= 200 and status < 300 then ok = ok + 1 else bad = bad + 1 end
  if mode == "consume_ack" then
    if status == 200 then
      local id = body:match('"job_id":%s*"([^"]+)"')
      if id then pending[#pending + 1] = id end
    elseif status == 204 then
      acked = acked + 1
    end
  end
end

function done(summary, latency, requests)
  local ok_total, bad_total, acked_total = 0, 0, 0
  for _, thread in ipairs(threads) do
    ok_total = ok_total + thread:get("ok")
    bad_total = bad_total + thread:get("bad")
    acked_total = acked_total + thread:get("acked")
  end
  local errors = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"ok":%d,"bad":%d,"acked":%d,"duration_s":%.6f,"p50_ms":%.3f,"p99_ms":%.3f,'
      .. '"socket_errors":%d}\n',
    summary.requests, ok_total, bad_total, acked_total, summary.duration / 1e6,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    errors.connect + errors.read + errors.write + errors.timeout))
end
