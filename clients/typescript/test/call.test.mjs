// call(): sync and async, every field of the body, and what the client keeps of the answer.

import assert from "node:assert/strict";
import { test } from "node:test";

import Taskgate, { RateLimitError } from "../dist/index.js";
import { env, unique } from "./helpers.mjs";

test("a sync call returns the finished task with every field of the schema", async () => {
  const tg = new Taskgate();
  const label = unique("sync");
  const t = await tg.call({
    api: "sentiment",
    input: { text: "I love this" },
    metadata: { run: label },
    timeoutMs: 10000,
  });
  assert.match(t.id, /^task_[0-9A-Z]{26}$/);
  assert.equal(t.object, "task");
  assert.equal(t.api, "sentiment");
  assert.equal(t.mode, "live");
  assert.equal(t.status, "succeeded");
  assert.equal(t.output.label, "positive");
  assert.equal(t.error, null);
  assert.equal(t.usage.units, 1);
  assert.equal(typeof t.usage.cost_usd, "string");
  assert.deepEqual(t.metadata, { run: label });
  assert.match(t.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.ok(t.started_at);
  assert.ok(t.completed_at);
  assert.equal(typeof t.duration_ms, "number");
  assert.match(tg.lastRequestId, /^req_/);
});

test("an async call returns at once with the task still running", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({
    api: "sentiment",
    input: { text: "slow" },
    mode: "async",
    sandbox: { delay_ms: 5000 },
  });
  assert.ok(["queued", "running"].includes(t.status), t.status);
  assert.equal(t.mode, "test");
  assert.equal(t.output ?? null, null);
  await tg.tasks.cancel(t.id);
});

test("sandbox failures come back as failed tasks, not errors", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({
    api: "token-count",
    input: { text: "hello" },
    sandbox: { outcome: "failed", error_code: "upstream_timeout" },
  });
  assert.equal(t.status, "failed");
  assert.equal(t.error.code, "upstream_timeout");
});

test("metadata null is accepted (no metadata)", async () => {
  const tg = new Taskgate();
  const t = await tg.call({ api: "token-count", input: { text: "a b c" }, metadata: null });
  assert.equal(t.status, "succeeded");
  assert.deepEqual(t.metadata, {});
});

test("the rate-limit headers of the last answer are readable from the client", async () => {
  // Unlimited plans send none.
  const tg = new Taskgate();
  await tg.call({ api: "token-count", input: { text: "hi" } });
  assert.deepEqual(tg.lastRateLimit, {
    limit: undefined,
    remaining: undefined,
    reset: undefined,
    policy: undefined,
    rateLimit: undefined,
  });

  // The limited key's plan allows 5 a minute; other tests share it, so this answer
  // may be a 429: its headers count all the same.
  const limited = new Taskgate({ apiKey: env.limitedKey, maxRetries: 0 });
  try {
    await limited.apis.get("sentiment");
  } catch (err) {
    assert.ok(err instanceof RateLimitError, String(err));
  }
  const rl = limited.lastRateLimit;
  assert.equal(rl.limit, 5);
  assert.equal(typeof rl.remaining, "number");
  assert.ok(rl.remaining >= 0 && rl.remaining <= 5);
  assert.ok(rl.reset > Date.now() / 1000 - 5, `reset ${rl.reset}`);
  assert.match(rl.policy, /"minute";q=5;w=60/);
  assert.match(rl.rateLimit, /"minute";r=\d+;t=\d+/);
});

test("a chat tool call round trip: a forced call, then its result sent back for a text answer", async () => {
  // Test mode answers a forced tool with a call whose arguments follow its parameters. The
  // chat kind's types are the generated ChatTool, ChatMessage and ChatOutput (see the README).
  const tg = new Taskgate({ apiKey: env.testKey });
  /** @type {import("../dist/index.js").ChatTool} */
  const getWeather = {
    name: "get_weather",
    description: "The current weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    },
  };
  /** @type {import("../dist/index.js").ChatMessage[]} */
  const messages = [{ role: "user", content: "What is the weather in Paris?" }];
  /** @type {import("../dist/index.js").ChatInput} */
  const input = { messages, tools: [getWeather], tool_choice: { name: "get_weather" } };
  const t = await tg.call({ api: "chat", input });
  assert.equal(t.status, "succeeded");
  assert.equal(t.mode, "test");
  /** @type {import("../dist/index.js").ChatOutput} */
  const output = t.output;
  assert.equal(output.finish_reason, "tool_calls");
  assert.equal(output.tool_calls.length, 1);
  const [call] = output.tool_calls;
  assert.equal(call.name, "get_weather");
  assert.equal(typeof call.id, "string");
  assert.ok(call.id);
  assert.equal(typeof call.arguments.city, "string");
  assert.ok(call.arguments.city);

  messages.push(
    { role: "assistant", tool_calls: output.tool_calls },
    { role: "tool", tool_call_id: call.id, content: '{"temp_c": 21}' },
  );
  const answer = await tg.call({ api: "chat", input: { messages, tools: [getWeather] } });
  assert.equal(answer.status, "succeeded", JSON.stringify(answer.error));
  /** @type {import("../dist/index.js").ChatOutput} */
  const final = answer.output;
  assert.equal(typeof final.text, "string");
  assert.ok(final.text);
  assert.deepEqual(final.tool_calls, []);
  assert.equal(final.finish_reason, "stop");
});
