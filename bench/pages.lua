-- GET /tasks pages, rotating over TG_PATHS (comma-separated): first pages, pages
-- deep in the history (created_before), cursor pages and filtered pages.
local key = os.getenv("TG_KEY")
local paths = {}
for p in string.gmatch(os.getenv("TG_PATHS") or "/api/v1/tasks?limit=20", "[^,]+") do paths[#paths + 1] = p end
wrk.headers["Authorization"] = "Bearer " .. key
local i = 0
function request()
  i = i + 1
  return wrk.format("GET", paths[i % #paths + 1])
end
