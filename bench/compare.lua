-- The load of bench/compare.py and bench/overhead.sh: POST the JSON in $TG_BODY (with the key in $TG_KEY
-- when it is set). Every answer is checked: ok when its status is 200 and its
-- body contains $TG_EXPECT. Requests are counted as they are sent, so that a
-- store can be checked against them, those cut off at the end of the run
-- included. done() prints "checked: <ok> ok, <bad> bad, <sent> sent".
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

local req
ok_count, bad_count, sent_count = 0, 0, 0
function init(args)
  req = wrk.format()
end

function request()
  sent_count = sent_count + 1
  return req
end

function response(status, headers, body)
  if status == 200 and string.find(body, expect, 1, true) then
    ok_count = ok_count + 1
  else
    bad_count = bad_count + 1
  end
end

function done(summary, latency, requests)
  local ok, bad, sent = 0, 0, 0
  for _, t in ipairs(threads) do
    ok = ok + t:get("ok_count")
    bad = bad + t:get("bad_count")
    sent = sent + t:get("sent_count")
  end
  io.write(string.format("checked: %d ok, %d bad, %d sent\n", ok, bad, sent))
end
