-- Seeds tasks fast: async POST /call; each thread stops after TG_SEED_PER_THREAD answers.
local key = os.getenv("TG_KEY")
local per_thread = tonumber(os.getenv("TG_SEED_PER_THREAD") or "50000")
wrk.method = "POST"
wrk.body = '{"api":"token-count","input":{"text":"seed"},"mode":"async"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. key
local n = 0
function response(status, headers, body)
  n = n + 1
  if n >= per_thread then wrk.thread:stop() end
end
