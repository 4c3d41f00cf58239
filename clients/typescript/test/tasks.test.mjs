// tasks.get, cancel, wait, list and listPage against the real server.

import assert from "node:assert/strict";
import { test } from "node:test";

import Taskgate, { AutoPager, ConflictError, WaitTimeoutError } from "../dist/index.js";
import { env, unique } from "./helpers.mjs";

test("tasks.get returns the details: input, key, idempotency key, events, attempts", async () => {
  const tg = new Taskgate();
  const t = await tg.call({ api: "sentiment", input: { text: "fine" }, idempotencyKey: unique("idem") });
  const d = await tg.tasks.get(t.id);
  assert.equal(d.id, t.id);
  assert.equal(d.status, "succeeded");
  assert.deepEqual(d.input, { text: "fine" });
  assert.match(d.key_id, /^key_/);
  assert.match(d.idempotency_key, /^idem-/);
  assert.deepEqual(
    d.events.map((e) => e.status),
    ["queued", "running", "succeeded"],
  );
  assert.equal(d.attempts.length, 1);
  assert.equal(d.attempts[0].outcome, "succeeded");
  assert.ok(d.output);
});

test("tasks.cancel stops a running task; a second cancel is the same task; a succeeded task is a conflict", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({ api: "sentiment", input: { text: "x" }, mode: "async", sandbox: { delay_ms: 5000 } });
  const c = await tg.tasks.cancel(t.id);
  assert.equal(c.id, t.id);
  assert.equal(c.status, "cancelled");
  const again = await tg.tasks.cancel(t.id);
  assert.equal(again.status, "cancelled");
  assert.equal(again.completed_at, c.completed_at);

  const done = await tg.call({ api: "sentiment", input: { text: "y" } });
  await assert.rejects(tg.tasks.cancel(done.id), (err) => {
    assert.ok(err instanceof ConflictError);
    assert.equal(err.status, 409);
    assert.equal(err.code, "task_not_cancellable");
    return true;
  });
});

test("tasks.wait polls until the task ends", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({ api: "sentiment", input: { text: "wait for me" }, mode: "async", sandbox: { delay_ms: 800 } });
  assert.notEqual(t.status, "succeeded");
  const done = await tg.tasks.wait(t.id, { timeoutMs: 30000 });
  assert.equal(done.id, t.id);
  assert.equal(done.status, "succeeded");
  assert.ok(done.output);
});

test("tasks.wait returns a cancelled or failed task as it is", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({
    api: "sentiment",
    input: { text: "boom" },
    mode: "async",
    sandbox: { delay_ms: 300, outcome: "failed" },
  });
  const done = await tg.tasks.wait(t.id, 30000);
  assert.equal(done.status, "failed");
  assert.equal(done.error.code, "upstream_error");
});

test("tasks.wait throws WaitTimeoutError when the task does not end in time", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({ api: "sentiment", input: { text: "late" }, mode: "async", sandbox: { delay_ms: 5000 } });
  try {
    await assert.rejects(tg.tasks.wait(t.id, { timeoutMs: 400 }), (err) => {
      assert.ok(err instanceof WaitTimeoutError);
      assert.equal(err.name, "WaitTimeoutError");
      assert.equal(err.taskId, t.id);
      assert.ok(["queued", "running"].includes(err.task.status));
      return true;
    });
  } finally {
    await tg.tasks.cancel(t.id);
  }
});

test("tasks.status is the task object of GET /call/{id}", async () => {
  const tg = new Taskgate();
  const t = await tg.call({ api: "token-count", input: { text: "one two" } });
  const s = await tg.tasks.status(t.id);
  assert.equal(s.id, t.id);
  assert.equal(s.status, "succeeded");
  assert.equal(s.input, undefined);
});

test("tasks.list follows next_cursor over every page; listPage gives one page", async () => {
  const since = new Date(Date.now() - 1);
  const requests = [];
  const tg = new Taskgate({
    fetch: (url, init) => {
      requests.push(url);
      return fetch(url, init);
    },
  });
  const label = unique("page");
  const created = [];
  for (let i = 0; i < 25; i++) {
    const t = await tg.call({ api: "language-detect", input: { text: `bonjour tout le monde ${i}` }, metadata: { run: label } });
    created.push(t.id);
  }
  const filters = { api: "language-detect", createdAfter: since };

  requests.length = 0;
  const seen = [];
  for await (const t of tg.tasks.list({ ...filters, limit: 10 })) seen.push(t);
  assert.equal(requests.length, 3, "three pages of 10, 10 and 5");
  assert.deepEqual(
    seen.map((t) => t.id),
    [...created].reverse(),
  );
  assert.ok(seen.every((t) => t.metadata.run === label && t.output === undefined));
  assert.ok(new URL(requests[0]).searchParams.get("created_after").startsWith(since.toISOString().slice(0, 19)));

  const asc = await tg.tasks.list({ ...filters, limit: 10, order: "asc" }).toArray();
  assert.deepEqual(
    asc.map((t) => t.id),
    created,
  );

  const p1 = await tg.tasks.listPage({ ...filters, limit: 10 });
  assert.equal(p1.object, "list");
  assert.equal(p1.items.length, 10);
  assert.equal(p1.has_more, true);
  assert.equal(p1.hasMore, true);
  assert.equal(p1.nextCursor, p1.next_cursor);
  const p2 = await tg.tasks.listPage({ ...filters, limit: 10, cursor: p1.nextCursor });
  const p3 = await tg.tasks.listPage({ ...filters, limit: 10, cursor: p2.nextCursor });
  assert.equal(p3.items.length, 5);
  assert.equal(p3.hasMore, false);
  assert.equal(p3.nextCursor, null);
  // The last page's null cursor is accepted as "no cursor" (the first page), not sent as "null".
  requests.length = 0;
  const again = await tg.tasks.listPage({ ...filters, limit: 10, cursor: p3.nextCursor });
  assert.deepEqual(
    again.items.map((t) => t.id),
    p1.items.map((t) => t.id),
  );
  assert.equal(new URL(requests[0]).searchParams.has("cursor"), false);
  assert.equal((await tg.tasks.list({ ...filters, limit: 10, cursor: null }).toArray()).length, 25);

  // Starting the iterator from a cursor, and walking the pages themselves.
  const rest = await tg.tasks.list({ ...filters, limit: 10, cursor: p1.nextCursor }).toArray();
  assert.equal(rest.length, 15);
  const sizes = [];
  for await (const page of tg.tasks.list({ ...filters, limit: 10 }).pages()) sizes.push(page.items.length);
  assert.deepEqual(sizes, [10, 10, 5]);
  assert.ok(tg.tasks.list() instanceof AutoPager);
});

test("tasks.list filters by status, one or several", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const since = new Date(Date.now() - 1);
  const ok = await tg.call({ api: "token-count", input: { text: "ok" } });
  const bad = await tg.call({ api: "token-count", input: { text: "bad" }, sandbox: { outcome: "failed" } });
  const filters = { api: "token-count", createdAfter: since };
  const failed = await tg.tasks.list({ ...filters, status: "failed" }).toArray();
  assert.deepEqual(
    failed.map((t) => t.id),
    [bad.id],
  );
  const both = await tg.tasks.list({ ...filters, status: ["succeeded", "failed"], order: "asc" }).toArray();
  assert.deepEqual(
    both.map((t) => t.id),
    [ok.id, bad.id],
  );
  const before = await tg.tasks.list({ ...filters, createdBefore: ok.created_at }).toArray();
  assert.equal(before.length, 0);
});
