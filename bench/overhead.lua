-- POST the JSON in $TG_BODY, with the key in $TG_KEY when it is set (the
-- gateway) and without (the fake itself). Every answer is checked: it counts
-- as ok when its status is 200 and its body contains $TG_EXPECT
-- ('"status":"succeeded"' for the gateway); done() prints the counts.
wrk.method = "POST"
wrk.body = os.getenv("TG_BODY")
wrk.headers["Content-Type"] = "application/json"
local key = os.getenv("TG_KEY")
if key and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end
local expect = os.getenv("TG_EXPECT") or ""

local threads = {}
function setup(thread)
  threads[#threads + 1] = thread
end

ok_count, bad_count = 0, 0
function response(status, headers, body)
  if status == 200 and string.find(body, expect, 1, true) then
    ok_count = ok_count + 1
  else
    bad_count = bad_count + 1
  end
end

function done(summary, latency, requests)
  local ok, bad = 0, 0
  for _, t in ipairs(threads) do
    ok = ok + t:get("ok_count")
    bad = bad + t:get("bad_count")
  end
  io.write(string.format("checked: %d ok, %d bad\n", ok, bad))
end
