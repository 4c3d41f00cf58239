// Retries, backoff, Retry-After and timeouts, against small local stand-ins for the server.

import assert from "node:assert/strict";
import { test } from "node:test";

import Taskgate, {
  APIConnectionError,
  APIError,
  APIStatusError,
  APITimeoutError,
  APIUserAbortError,
  InternalServerError,
  RateLimitError,
} from "../dist/index.js";
import { closedPort, errorEnvelope, okEnvelope, sendJSON, stubServer, UUID_V4 } from "./helpers.mjs";

const TASK = {
  id: "task_01JD2W3KX7AAAAAAAAAAAAAAAA",
  object: "task",
  api: "sentiment",
  mode: "live",
  status: "succeeded",
  output: { label: "positive", score: 0.9 },
  error: null,
  usage: { units: 1, input_tokens: null, output_tokens: null, cost_usd: "0.000000" },
  metadata: {},
  created_at: "2026-01-01T00:00:00.000Z",
  started_at: "2026-01-01T00:00:00.001Z",
  completed_at: "2026-01-01T00:00:00.002Z",
  duration_ms: 1,
};

function rateLimited(retryAfter) {
  return (req, res, body, n) => {
    if (n === 0) {
      sendJSON(res, 429, errorEnvelope("rate_limit_error", "rate_limit_exceeded", "Slow down."), {
        "Retry-After": String(retryAfter),
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "0",
        "X-RateLimit-Reset": "1900000000",
      });
    } else {
      sendJSON(res, 200, okEnvelope(TASK), {
        "X-RateLimit-Limit": "5",
        "X-RateLimit-Remaining": "4",
        "X-RateLimit-Reset": "1900000001",
      });
    }
  };
}

test("a 429 is retried after its Retry-After, and the answer's headers are kept", async () => {
  const stub = await stubServer(rateLimited(1));
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    const t = await tg.call({ api: "sentiment", input: { text: "hi" } });
    assert.equal(t.id, TASK.id);
    assert.equal(stub.requests.length, 2);
    const waited = stub.requests[1].at - stub.requests[0].at;
    assert.ok(waited >= 950, `waited ${waited} ms`);
    // The same generated key on both attempts.
    const key = stub.requests[0].headers["idempotency-key"];
    assert.match(key, UUID_V4);
    assert.equal(stub.requests[1].headers["idempotency-key"], key);
    assert.equal(stub.requests[1].body, stub.requests[0].body);
    assert.deepEqual(tg.lastRateLimit, {
      limit: 5,
      remaining: 4,
      reset: 1900000001,
      policy: undefined,
      rateLimit: undefined,
    });
  } finally {
    await stub.close();
  }
});

test("Retry-After: 0 retries at once; a GET is retried too", async () => {
  const stub = await stubServer(rateLimited(0));
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    const t = await tg.tasks.status(TASK.id);
    assert.equal(t.status, "succeeded");
    assert.equal(stub.requests.length, 2);
    assert.equal(stub.requests[0].headers["idempotency-key"], undefined);
  } finally {
    await stub.close();
  }
});

test("a Retry-After over 60 s raises the RateLimitError at once", async () => {
  const stub = await stubServer(rateLimited(120));
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    await assert.rejects(tg.apis.get("sentiment"), (err) => {
      assert.ok(err instanceof RateLimitError);
      assert.equal(err.retryAfter, 120);
      assert.equal(err.requestId, "req_stub_error");
      return true;
    });
    assert.equal(stub.requests.length, 1);
  } finally {
    await stub.close();
  }
});

test("5xx is retried with backoff, then InternalServerError after maxRetries", async () => {
  const stub = await stubServer((req, res) =>
    sendJSON(res, 503, errorEnvelope("api_error", "service_unavailable", "Draining.")),
  );
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url, maxRetries: 2 });
    await assert.rejects(tg.tasks.get(TASK.id), (err) => {
      assert.ok(err instanceof InternalServerError);
      assert.equal(err.status, 503);
      assert.equal(err.code, "service_unavailable");
      assert.equal(err.type, "api_error");
      return true;
    });
    assert.equal(stub.requests.length, 3);
    // 0.5 s then 1 s, each up to a quarter less.
    assert.ok(stub.requests[1].at - stub.requests[0].at >= 350);
    assert.ok(stub.requests[2].at - stub.requests[1].at >= 700);
  } finally {
    await stub.close();
  }
});

test("a 500 that recovers: the retry's answer is returned", async () => {
  const stub = await stubServer((req, res, body, n) =>
    n === 0
      ? sendJSON(res, 500, errorEnvelope("api_error", "internal_error", "Oops."))
      : sendJSON(res, 200, okEnvelope(TASK)),
  );
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    const t = await tg.tasks.cancel(TASK.id);
    assert.equal(t.id, TASK.id);
    assert.equal(stub.requests.length, 2);
  } finally {
    await stub.close();
  }
});

test("409 idempotency_in_progress is retried; other 409s and 4xx are not", async () => {
  const stub = await stubServer((req, res, body, n) =>
    n === 0
      ? sendJSON(res, 409, errorEnvelope("conflict_error", "idempotency_in_progress", "Wait."), { "Retry-After": "0" })
      : sendJSON(res, 409, errorEnvelope("conflict_error", "task_not_cancellable", "Done.")),
  );
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    await assert.rejects(tg.call({ api: "sentiment", input: { text: "x" } }), (err) => err.code === "task_not_cancellable");
    assert.equal(stub.requests.length, 2);
  } finally {
    await stub.close();
  }
});

test("statuses without a class of their own are APIError (APIStatusError)", async () => {
  const stub = await stubServer((req, res) =>
    sendJSON(res, 405, errorEnvelope("invalid_request_error", "method_not_allowed", "No.")),
  );
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    await assert.rejects(tg.apis.get("x"), (err) => {
      assert.equal(err.constructor, APIError);
      assert.ok(err instanceof APIStatusError);
      assert.equal(err.status, 405);
      assert.equal(err.code, "method_not_allowed");
      return true;
    });
    assert.equal(stub.requests.length, 1);
  } finally {
    await stub.close();
  }
});

test("an answer that is not the envelope still gives the right class", async () => {
  const stub = await stubServer((req, res) => {
    res.writeHead(502, { "Content-Type": "text/html", "X-Request-Id": "req_proxy" });
    res.end("<html>Bad gateway</html>");
  });
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url, maxRetries: 0 });
    await assert.rejects(tg.apis.get("x"), (err) => {
      assert.ok(err instanceof InternalServerError);
      assert.equal(err.status, 502);
      assert.equal(err.code, undefined);
      assert.equal(err.requestId, "req_proxy");
      assert.match(err.message, /502/);
      return true;
    });
  } finally {
    await stub.close();
  }
});

test("without retries, a POST /call carries no generated Idempotency-Key; a given one is always sent", async () => {
  const stub = await stubServer((req, res) => sendJSON(res, 200, okEnvelope(TASK)));
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url, maxRetries: 0 });
    await tg.call({ api: "sentiment", input: { text: "x" } });
    await tg.call({ api: "sentiment", input: { text: "x" }, idempotencyKey: "mine-1" });
    assert.equal(stub.requests[0].headers["idempotency-key"], undefined);
    assert.equal(stub.requests[1].headers["idempotency-key"], "mine-1");
    assert.deepEqual(JSON.parse(stub.requests[1].body), { api: "sentiment", input: { text: "x" } });

    const full = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    await full.call({
      api: "sentiment",
      input: { text: "x" },
      mode: "async",
      metadata: { a: "b" },
      timeoutMs: 1234,
      sandbox: { delay_ms: 10 },
    });
    assert.deepEqual(JSON.parse(stub.requests[2].body), {
      api: "sentiment",
      input: { text: "x" },
      mode: "async",
      metadata: { a: "b" },
      timeout_ms: 1234,
      sandbox: { delay_ms: 10 },
    });
    assert.equal(stub.requests[2].headers["content-type"], "application/json");
  } finally {
    await stub.close();
  }
});

test("connection errors are retried, then APIConnectionError", async () => {
  const port = await closedPort();
  let attempts = 0;
  const tg = new Taskgate({
    apiKey: "tg_x",
    baseURL: `http://127.0.0.1:${port}/api/v1`,
    maxRetries: 1,
    fetch: (url, init) => {
      attempts++;
      return fetch(url, init);
    },
  });
  await assert.rejects(tg.apis.get("x"), APIConnectionError);
  assert.equal(attempts, 2);
});

test("a request slower than the timeout is APITimeoutError (a kind of APIConnectionError)", async () => {
  const stub = await stubServer(() => {
    /* never answers */
  });
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url, timeout: 200, maxRetries: 1 });
    await assert.rejects(tg.apis.get("x"), (err) => {
      assert.ok(err instanceof APITimeoutError);
      assert.ok(err instanceof APIConnectionError);
      return true;
    });
    assert.equal(stub.requests.length, 2);
    // A per-request override.
    await assert.rejects(tg.apis.get("x", { timeout: 100, maxRetries: 0 }), APITimeoutError);
    assert.equal(stub.requests.length, 3);
  } finally {
    await stub.close();
  }
});

test("the caller's AbortSignal stops a request: APIUserAbortError, no retry", async () => {
  const stub = await stubServer(() => {
    /* never answers */
  });
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    await assert.rejects(tg.apis.get("x", { signal: controller.signal }), APIUserAbortError);
    assert.equal(stub.requests.length, 1);
  } finally {
    await stub.close();
  }
});
