// The official `openai` Node package against Taskgate's /openai/v1.
// Run through scripts/with-server.sh (it provides the server and the keys):
//   scripts/with-server.sh node --test e2e/openai-sdk.test.mjs
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const server = process.env.TASKGATE_SERVER_URL;
const baseURL = `${server}/openai/v1`;
const live = process.env.TASKGATE_API_KEY;
const testKey = process.env.TASKGATE_TEST_KEY;
const limited = process.env.TASKGATE_LIMITED_KEY;
// The fake upstream's fixed reply (crates/taskgate-providers/examples/fake_openai.rs).
const reply = "Hello! How can I help you today?";
const messages = [{ role: "user", content: "Say hello." }];
const client = (apiKey = live, opts = {}) => new OpenAI({ apiKey, baseURL, ...opts });

async function task(id, key = live) {
  const r = await fetch(`${server}/api/v1/tasks/${id}`, { headers: { authorization: `Bearer ${key}` } });
  return (await r.json()).data;
}

test("models lists the chat and embedding APIs", async () => {
  const ids = [];
  for await (const m of client().models.list()) ids.push(m.id);
  assert.deepEqual(ids.sort(), ["chat", "embed"]);
});

test("a chat completion is a task", async () => {
  const { data, response } = await client()
    .chat.completions.create({ model: "chat", messages })
    .withResponse();
  assert.equal(data.choices[0].message.content, reply);
  assert.equal(data.usage.total_tokens, 19);
  const id = response.headers.get("x-taskgate-task-id");
  assert.equal(data.id, id);
  const stored = await task(id);
  assert.equal(stored.status, "succeeded");
  assert.equal(stored.output.text, reply);
});

test("a streamed chat completion", async () => {
  const stream = await client().chat.completions.create({
    model: "chat",
    messages,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.choices.length) {
      text += chunk.choices[0].delta.content ?? "";
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
  }
  assert.equal(text, reply);
  assert.equal(finish, "stop");
  assert.equal(usage.prompt_tokens, 10);
});

test("a test key streams its sandbox reply word by word", async () => {
  // `sandbox` (test keys only, as in POST /call): the reply streams over the delay.
  const stream = await client(testKey).chat.completions.create({
    model: "chat",
    messages,
    stream: true,
    sandbox: { delay_ms: 300 },
  });
  const pieces = [];
  for await (const chunk of stream) {
    const c = chunk.choices[0]?.delta?.content;
    if (c) pieces.push(c);
  }
  assert.ok(pieces.length > 1, `pieces: ${JSON.stringify(pieces)}`);
});

test("embeddings", async () => {
  // The SDK asks for base64 by default and decodes it.
  const result = await client().embeddings.create({ model: "embed", input: ["a cat", "a dog"] });
  assert.deepEqual(result.data.map((d) => d.index), [0, 1]);
  assert.equal(result.data[0].embedding.length, 3);
  const floats = await client().embeddings.create({ model: "embed", input: "a cat", encoding_format: "float" });
  result.data[0].embedding.forEach((x, i) => assert.ok(Math.abs(x - floats.data[0].embedding[i]) < 1e-5));
});

test("a bad key is an AuthenticationError", async () => {
  await assert.rejects(client("tg_live_" + "x".repeat(40), { maxRetries: 0 }).models.list(), (e) => {
    assert.ok(e instanceof OpenAI.AuthenticationError);
    assert.equal(e.status, 401);
    assert.ok(e.code);
    return true;
  });
});

test("the rate limit is a RateLimitError", async () => {
  const c = client(limited, { maxRetries: 0 });
  await assert.rejects(
    (async () => {
      for (let i = 0; i < 20; i++) await c.models.list();
    })(),
    (e) => {
      assert.ok(e instanceof OpenAI.RateLimitError);
      assert.equal(e.code, "rate_limit_exceeded");
      assert.ok(Number(e.headers.get("retry-after")) >= 1);
      return true;
    },
  );
});

test("an unknown model is a NotFoundError", async () => {
  await assert.rejects(client().chat.completions.create({ model: "nope", messages }), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.param, "model");
    return true;
  });
});
