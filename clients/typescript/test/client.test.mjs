// The client itself: defaults from the environment, options, headers, version.

import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { test } from "node:test";

import DefaultTaskgate, { Taskgate, TaskgateError, VERSION } from "../dist/index.js";
import { env, okEnvelope, sendJSON, stubServer } from "./helpers.mjs";

test("the class is both the default and a named export", () => {
  assert.equal(DefaultTaskgate, Taskgate);
  assert.equal(Taskgate.VERSION, VERSION);
});

test("the package loads by its name with import, and with require where Node can require ESM", async () => {
  // A package can name itself through its own "exports" (self-reference), as a user's
  // program that installed it does.
  const mod = await import("taskgate");
  assert.equal(mod.default, Taskgate);
  assert.equal(mod.Taskgate, Taskgate);
  // A CommonJS program (`npm init` makes one unless "type" is "module"): Node.js 20.19+
  // and 22.12+ load an ES module with require(); older ones refuse with ERR_REQUIRE_ESM.
  // Either way the package's exports must let require() find it
  // (not ERR_PACKAGE_PATH_NOT_EXPORTED).
  const require = createRequire(import.meta.url);
  if (process.features.require_module) {
    const cjs = require("taskgate");
    assert.equal(cjs.Taskgate, Taskgate);
    assert.equal(cjs.default, Taskgate);
  } else {
    assert.throws(() => require("taskgate"), { code: "ERR_REQUIRE_ESM" });
  }
});

test("VERSION is the package's version", async () => {
  const pkg = JSON.parse(await readFile(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(VERSION, "0.1.0");
  assert.equal(pkg.version, VERSION);
  assert.equal(pkg.license, "Apache-2.0");
});

test("apiKey and baseURL default to TASKGATE_API_KEY and TASKGATE_BASE_URL", async () => {
  const tg = new Taskgate();
  assert.equal(tg.apiKey, env.apiKey);
  assert.equal(tg.baseURL, env.baseURL.replace(/\/+$/, ""));
  assert.equal(tg.timeout, 60000);
  assert.equal(tg.maxRetries, 2);
  const api = await tg.apis.get("sentiment");
  assert.equal(api.slug, "sentiment");
});

test("without TASKGATE_BASE_URL the base URL is http://127.0.0.1:8080/api/v1", () => {
  const saved = process.env.TASKGATE_BASE_URL;
  delete process.env.TASKGATE_BASE_URL;
  try {
    assert.equal(new Taskgate({ apiKey: "tg_x" }).baseURL, "http://127.0.0.1:8080/api/v1");
  } finally {
    process.env.TASKGATE_BASE_URL = saved;
  }
});

test("a missing API key is a TaskgateError at construction", () => {
  const saved = process.env.TASKGATE_API_KEY;
  delete process.env.TASKGATE_API_KEY;
  try {
    assert.throws(() => new Taskgate(), (err) => {
      assert.ok(err instanceof TaskgateError);
      assert.match(err.message, /TASKGATE_API_KEY/);
      return true;
    });
    assert.throws(() => new Taskgate({ apiKey: "" }), TaskgateError);
  } finally {
    process.env.TASKGATE_API_KEY = saved;
  }
});

test("bad options are refused", () => {
  assert.throws(() => new Taskgate({ apiKey: "k", maxRetries: -1 }), TaskgateError);
  assert.throws(() => new Taskgate({ apiKey: "k", timeout: 0 }), TaskgateError);
});

test("a trailing slash on the base URL is tolerated", async () => {
  const tg = new Taskgate({ apiKey: env.apiKey, baseURL: `${env.baseURL}/` });
  const api = await tg.apis.get("token-count");
  assert.equal(api.slug, "token-count");
});

test("every request carries the key, the User-Agent and JSON headers", async () => {
  const stub = await stubServer((req, res) => sendJSON(res, 200, okEnvelope({ slug: "x" })));
  try {
    const tg = new Taskgate({ apiKey: "tg_stub", baseURL: stub.url, defaultHeaders: { "X-Extra": "1" } });
    await tg.apis.get("x", { headers: { "X-Per-Request": "2" } });
    const [r] = stub.requests;
    assert.equal(r.url, "/api/v1/apis/x");
    assert.equal(r.headers.authorization, "Bearer tg_stub");
    assert.equal(r.headers["user-agent"], "taskgate-typescript/0.1.0");
    assert.equal(r.headers.accept, "application/json");
    assert.equal(r.headers["x-extra"], "1");
    assert.equal(r.headers["x-per-request"], "2");
    assert.equal(tg.lastRequestId, "req_stub");
  } finally {
    await stub.close();
  }
});

test("a custom fetch is used", async () => {
  const seen = [];
  const tg = new Taskgate({
    apiKey: env.apiKey,
    fetch: (url, init) => {
      seen.push([init.method, url]);
      return fetch(url, init);
    },
  });
  await tg.apis.get("sentiment");
  assert.deepEqual(seen, [["GET", `${env.baseURL.replace(/\/+$/, "")}/apis/sentiment`]]);
});
