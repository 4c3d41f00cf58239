// One error class per failure, each one provoked on the real server.

import assert from "node:assert/strict";
import { test } from "node:test";

import Taskgate, {
  APIConnectionError,
  APIError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  TaskgateError,
  UnprocessableEntityError,
} from "../dist/index.js";
import { closedPort, env, unique } from "./helpers.mjs";

/** The fields every API error carries. */
function checkError(err, Class, status, type, code) {
  assert.ok(err instanceof Class, `${err?.constructor?.name}: ${err?.message}`);
  assert.ok(err instanceof APIError);
  assert.ok(err instanceof TaskgateError);
  assert.ok(err instanceof Error);
  assert.equal(err.name, Class.name);
  assert.equal(err.status, status);
  assert.equal(err.type, type);
  assert.equal(err.code, code);
  assert.equal(typeof err.message, "string");
  assert.ok(err.message.length > 0);
  assert.match(err.requestId, /^req_/);
  assert.equal(err.request_id, err.requestId);
  return true;
}

test("401: a wrong key is AuthenticationError", async () => {
  const tg = new Taskgate({ apiKey: "tg_wrongwrongwrongwrongwrongwrong000000" });
  await assert.rejects(tg.tasks.listPage(), (err) =>
    checkError(err, AuthenticationError, 401, "authentication_error", "invalid_api_key"),
  );
  assert.match(tg.lastRequestId, /^req_/);
});

test("403: a restricted key without tasks:write calling is PermissionDeniedError", async () => {
  const tg = new Taskgate({ apiKey: env.restrictedKey });
  await assert.rejects(tg.call({ api: "sentiment", input: { text: "hi" } }), (err) =>
    checkError(err, PermissionDeniedError, 403, "permission_error", "insufficient_permissions"),
  );
});

test("404: an unknown task is NotFoundError", async () => {
  const tg = new Taskgate();
  for (const read of [(id) => tg.tasks.get(id), (id) => tg.tasks.status(id), (id) => tg.tasks.cancel(id)]) {
    await assert.rejects(read("task_01JD2W3KX7ZZZZZZZZZZZZZZZZ"), (err) =>
      checkError(err, NotFoundError, 404, "not_found_error", "task_not_found"),
    );
  }
  await assert.rejects(tg.call({ api: "no-such-api", input: {} }), (err) =>
    checkError(err, NotFoundError, 404, "not_found_error", "api_not_found"),
  );
});

test("409: cancelling a succeeded task is ConflictError", async () => {
  const tg = new Taskgate();
  const t = await tg.call({ api: "sentiment", input: { text: "done already" } });
  await assert.rejects(tg.tasks.cancel(t.id), (err) =>
    checkError(err, ConflictError, 409, "conflict_error", "task_not_cancellable"),
  );
});

test("422: the same Idempotency-Key with another body is UnprocessableEntityError", async () => {
  const tg = new Taskgate();
  const key = unique("reuse");
  const first = await tg.call({ api: "sentiment", input: { text: "one" }, idempotencyKey: key });
  const replay = await tg.call({ api: "sentiment", input: { text: "one" }, idempotencyKey: key });
  assert.equal(replay.id, first.id);
  await assert.rejects(tg.call({ api: "sentiment", input: { text: "two" }, idempotencyKey: key }), (err) =>
    checkError(err, UnprocessableEntityError, 422, "invalid_request_error", "idempotency_key_reused"),
  );
});

test("400: invalid input is BadRequestError with param and details", async () => {
  const tg = new Taskgate();
  await assert.rejects(tg.call({ api: "sentiment", input: {} }), (err) => {
    checkError(err, BadRequestError, 400, "invalid_request_error", "invalid_input");
    assert.equal(err.param, "input.text");
    assert.ok(Array.isArray(err.details) && err.details.length >= 1);
    assert.equal(typeof err.details[0].message, "string");
    return true;
  });
  // sandbox with a live key
  await assert.rejects(tg.call({ api: "sentiment", input: { text: "x" }, sandbox: { delay_ms: 1 } }), (err) => {
    checkError(err, BadRequestError, 400, "invalid_request_error", "invalid_field");
    assert.equal(err.param, "sandbox");
    return true;
  });
  // a bad list parameter
  await assert.rejects(tg.tasks.listPage({ limit: 1000 }), (err) => {
    checkError(err, BadRequestError, 400, "invalid_request_error", "invalid_parameter");
    assert.equal(err.param, "limit");
    return true;
  });
});

test("429: the limited key's 5 a minute run out: RateLimitError with retryAfter", async () => {
  const tg = new Taskgate({ apiKey: env.limitedKey, maxRetries: 0 });
  let error;
  // Other tests share the key, so count nothing: go until the limit answers.
  for (let i = 0; i < 10 && !error; i++) {
    try {
      await tg.apis.listPage({ limit: 1 });
    } catch (err) {
      error = err;
    }
  }
  checkError(error, RateLimitError, 429, "rate_limit_error", "rate_limit_exceeded");
  assert.ok(Number.isInteger(error.retryAfter) && error.retryAfter >= 1 && error.retryAfter <= 60, `${error.retryAfter}`);
  assert.equal(error.retry_after, error.retryAfter);
  assert.equal(error.details[0].window, "minute");
  assert.equal(error.details[0].limit, 5);
  assert.equal(error.headers.get("retry-after"), String(error.retryAfter));
  assert.equal(tg.lastRateLimit.remaining, 0);
});

test("a closed port is APIConnectionError", async () => {
  const port = await closedPort();
  const tg = new Taskgate({ apiKey: "tg_x", baseURL: `http://127.0.0.1:${port}/api/v1`, maxRetries: 0 });
  await assert.rejects(tg.apis.get("sentiment"), (err) => {
    assert.ok(err instanceof APIConnectionError);
    assert.ok(err instanceof TaskgateError);
    assert.equal(err.name, "APIConnectionError");
    assert.equal(err.status, undefined);
    assert.match(err.message, /ECONNREFUSED|fetch failed/);
    assert.ok(err.cause);
    return true;
  });
  await assert.rejects(tg.call({ api: "sentiment", input: { text: "x" } }), APIConnectionError);
});
