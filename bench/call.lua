-- POST /call of a built-in API, sync: every request runs and stores one task.
local key = os.getenv("TG_KEY")
wrk.method = "POST"
wrk.body = '{"api":"sentiment","input":{"text":"The service is fast and I love it"}}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. key

local bad = 0
function response(status, headers, body)
  if status ~= 200 then bad = bad + 1 end
end
function done(summary, latency, requests)
  io.write(string.format("non-200: %d\n", summary.errors.status))
end
