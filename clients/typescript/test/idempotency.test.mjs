// A POST /call whose answer is lost is retried under the same Idempotency-Key and
// creates one task only: a proxy forwards the first call to the real server but
// answers the client 503 instead of the real answer.

import assert from "node:assert/strict";
import { test } from "node:test";

import Taskgate from "../dist/index.js";
import { env, errorEnvelope, forward, sendJSON, stubServer, unique, UUID_V4 } from "./helpers.mjs";

test("a lost answer is retried with the same generated key: one task, replayed", async () => {
  const replayed = [];
  const proxy = await stubServer(async (req, res, body, n) => {
    const real = await forward(req, body);
    if (req.method === "POST" && n === 0) {
      // The task was made; the client never hears of it.
      sendJSON(res, 503, errorEnvelope("api_error", "service_unavailable", "Lost on the way."));
      return;
    }
    replayed.push(real.headers.get("idempotent-replayed"));
    res.writeHead(real.status, {
      "Content-Type": real.headers.get("content-type") ?? "application/json",
      "X-Request-Id": real.headers.get("x-request-id") ?? "",
    });
    res.end(real.body);
  });
  try {
    const label = unique("once");
    const tg = new Taskgate({ baseURL: proxy.url });
    const t = await tg.call({ api: "token-count", input: { text: "count me once" }, metadata: { run: label } });
    assert.equal(t.status, "succeeded");
    assert.deepEqual(t.metadata, { run: label });

    const posts = proxy.requests.filter((r) => r.method === "POST");
    assert.equal(posts.length, 2);
    const key = posts[0].headers["idempotency-key"];
    assert.match(key, UUID_V4);
    assert.equal(posts[1].headers["idempotency-key"], key);
    assert.deepEqual(replayed, ["true"]);

    const direct = new Taskgate();
    const mine = [];
    for await (const task of direct.tasks.list({ api: "token-count", limit: 100 })) {
      if (task.metadata.run === label) mine.push(task.id);
    }
    assert.deepEqual(mine, [t.id]);
    const detail = await direct.tasks.get(t.id);
    assert.equal(detail.idempotency_key, key);
  } finally {
    await proxy.close();
  }
});

test("each call gets its own generated key", async () => {
  const stub = await stubServer(async (req, res, body) => {
    const real = await forward(req, body);
    res.writeHead(real.status, { "Content-Type": "application/json" });
    res.end(real.body);
  });
  try {
    const tg = new Taskgate({ apiKey: env.apiKey, baseURL: stub.url });
    const a = await tg.call({ api: "token-count", input: { text: "same" } });
    const b = await tg.call({ api: "token-count", input: { text: "same" } });
    assert.notEqual(a.id, b.id);
    const [k1, k2] = stub.requests.map((r) => r.headers["idempotency-key"]);
    assert.match(k1, UUID_V4);
    assert.match(k2, UUID_V4);
    assert.notEqual(k1, k2);
  } finally {
    await stub.close();
  }
});
