#!/usr/bin/env python3
"""The GET /tasks paths bench/pages.lua rotates over, comma-separated, across a
store's whole history: first pages both ways, a cursor page, pages ending at ten
points spread over the creation times (created_before), and one filtered page
per FILTER (a query string such as "status=succeeded&api=token-count").

    bench/page_paths.py PORT KEY [FILTER...]
"""

import json
import sys
import urllib.request
from datetime import datetime


def main():
    port, key, filters = sys.argv[1], sys.argv[2], sys.argv[3:]

    def get(query):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/tasks?{query}",
                                     headers={"Authorization": f"Bearer {key}"})
        return json.load(urllib.request.urlopen(req))["data"]

    def when(s):
        return datetime.fromisoformat(s.replace("Z", "+00:00"))

    oldest = when(get("limit=1&order=asc")["items"][0]["created_at"])
    newest = when(get("limit=1")["items"][0]["created_at"])
    paths = ["/api/v1/tasks?limit=20", "/api/v1/tasks?limit=20&order=asc"]
    paths += [f"/api/v1/tasks?limit=20&{f}" for f in filters]
    paths.append("/api/v1/tasks?limit=20&cursor=" + get("limit=20")["next_cursor"])
    for i in range(1, 11):
        t = oldest + (newest - oldest) * i / 11
        paths.append("/api/v1/tasks?limit=20&created_before=" + t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")
    print(",".join(paths))


if __name__ == "__main__":
    main()
