-- The soak's mix (bench/soak.py): nine sync chat calls, then one page of
-- GET /api/v1/tasks, over and over; a non-200 answer is counted.
local key = os.getenv("TG_KEY")
local body = os.getenv("TG_BODY")
local n = 0
local calls, pages, bad = 0, 0, 0

function request()
  n = n + 1
  if n % 10 == 0 then
    return wrk.format("GET", "/api/v1/tasks?limit=20", { ["Authorization"] = "Bearer " .. key })
  end
  return wrk.format("POST", "/api/v1/call", {
    ["Authorization"] = "Bearer " .. key,
    ["Content-Type"] = "application/json",
  }, body)
end

function response(status, headers, body)
  if status ~= 200 then bad = bad + 1 end
end

-- Each wrk thread has its own copy of these; the totals are read from the
-- store and from wrk's own summary.
function done(summary, latency, requests)
  io.write(string.format("non-2xx or 3xx: %d\n", summary.errors.status))
end
