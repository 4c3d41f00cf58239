// apis.list, apis.listPage and apis.get against the real server's catalog.

import assert from "node:assert/strict";
import { test } from "node:test";

import Taskgate, { NotFoundError, PermissionDeniedError } from "../dist/index.js";
import { env } from "./helpers.mjs";

const CATALOG = ["chat", "embed", "language-detect", "sentiment", "token-count"];

test("apis.list follows next_cursor over every page", async () => {
  let requests = 0;
  const tg = new Taskgate({
    fetch: (url, init) => {
      requests++;
      return fetch(url, init);
    },
  });
  const slugs = [];
  for await (const api of tg.apis.list({ limit: 2 })) {
    assert.equal(api.object, "api");
    slugs.push(api.slug);
  }
  assert.deepEqual([...slugs].sort(), CATALOG);
  assert.equal(requests, 3, "pages of 2, 2 and 1");

  const page = await tg.apis.listPage({ limit: 2 });
  assert.equal(page.items.length, 2);
  assert.equal(page.hasMore, true);
  const next = await tg.apis.listPage({ limit: 2, cursor: page.nextCursor });
  assert.notEqual(next.items[0].slug, page.items[0].slug);
});

test("apis.list filters by kind, provider and text", async () => {
  const tg = new Taskgate();
  const chat = await tg.apis.list({ kind: "chat" }).toArray();
  assert.deepEqual(
    chat.map((a) => a.slug),
    ["chat"],
  );
  const builtin = await tg.apis.list({ provider: "builtin" }).toArray();
  assert.deepEqual(builtin.map((a) => a.slug).sort(), ["language-detect", "sentiment", "token-count"]);
  const found = await tg.apis.list({ q: "sentiment" }).toArray();
  assert.ok(found.some((a) => a.slug === "sentiment"));
});

test("apis.get returns the schemas, examples and limits", async () => {
  const tg = new Taskgate();
  const api = await tg.apis.get("sentiment");
  assert.equal(api.slug, "sentiment");
  assert.equal(api.kind, "classification");
  assert.equal(api.input_schema.type, "object");
  assert.ok(api.output_schema);
  assert.ok(Array.isArray(api.examples));
  assert.equal(typeof api.limits.timeout_ms, "number");
  assert.equal(typeof api.limits.max_input_bytes, "number");
  assert.equal(typeof api.pricing.unit, "string");
});

test("apis.get of an unknown slug is NotFoundError; a restricted key sees only its APIs", async () => {
  const tg = new Taskgate();
  await assert.rejects(tg.apis.get("no-such-api"), (err) => {
    assert.ok(err instanceof NotFoundError);
    assert.equal(err.code, "api_not_found");
    return true;
  });
  const restricted = new Taskgate({ apiKey: env.restrictedKey });
  const mine = await restricted.apis.list().toArray();
  assert.deepEqual(
    mine.map((a) => a.slug),
    ["sentiment"],
  );
  await assert.rejects(restricted.apis.get("chat"), PermissionDeniedError);
});
