-- wrk script of `make bench`: POST one grading job per request, each with its own
-- Idempotency-Key, and print the figures as one JSON line when done.
--   wrk -s wrk_post.lua URL -- KEY_PREFIX BODY [AUTHORIZATION]

local counter = 0
local prefix = "bench"
local next_id = 0

function setup(thread)
  next_id = next_id + 1
  thread:set("thread_id", next_id)
end

function init(args)
  prefix = (args[1] or "bench") .. "-" .. tostring(thread_id or 0) .. "-"
  wrk.method = "POST"
  wrk.body = args[2] or "{}"
  wrk.headers["Content-Type"] = "application/json"
  if args[3] and args[3] ~= "" then
    wrk.headers["Authorization"] = args[3]
  end
end

function request()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = prefix .. counter
  return wrk.format()
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "non_2xx": %d, "socket_errors": %d, ' ..
    '"p50_us": %d, "p99_us": %d, "max_us": %d}\n',
    summary.requests, summary.duration, e.status,
    e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
