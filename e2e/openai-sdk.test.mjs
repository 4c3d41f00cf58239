// The official `openai` Node package against Taskgate's /openai/v1.
// Run through scripts/with-server.sh (it provides the server and the keys):
//   scripts/with-server.sh node --test e2e/openai-sdk.test.mjs
//
// The `chat` API's upstream is the fake OpenAI
// (crates/taskgate-providers/examples/fake_openai.rs): a fixed reply; offered
// tools, a call of one; given a tool's result, "The tool said: " and it. So a
// live key runs an agent's turns as a model would.
import { test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { zodFunction, zodResponseFormat } from "openai/helpers/zod";
import { z } from "zod";

const server = process.env.TASKGATE_SERVER_URL;
const baseURL = `${server}/openai/v1`;
const live = process.env.TASKGATE_API_KEY;
const testKey = process.env.TASKGATE_TEST_KEY;
const limited = process.env.TASKGATE_LIMITED_KEY;
// The fake upstream's fixed reply (crates/taskgate-providers/examples/fake_openai.rs).
const reply = "Hello! How can I help you today?";
const messages = [{ role: "user", content: "Say hello." }];
const client = (apiKey = live, opts = {}) => new OpenAI({ apiKey, baseURL, ...opts });
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

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

test("a tool call round trip", async () => {
  const convo = [{ role: "user", content: "What is the weather in Paris?" }];
  const first = await client().chat.completions.create({ model: "chat", messages: convo, tools: [weather] });
  const message = first.choices[0].message;
  assert.equal(first.choices[0].finish_reason, "tool_calls");
  const [call] = message.tool_calls;
  assert.equal(call.type, "function");
  assert.equal(call.function.name, "get_weather");
  assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
  convo.push(message, { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" });
  const second = await client().chat.completions.create({ model: "chat", messages: convo, tools: [weather] });
  assert.equal(second.choices[0].finish_reason, "stop");
  assert.equal(second.choices[0].message.content, "The tool said: sunny, 21 C");
});

test("the chat.completions.stream helper assembles a streamed tool call", async () => {
  const stream = client().chat.completions.stream({
    model: "chat",
    messages: [{ role: "user", content: "What is the weather in Paris?" }],
    tools: [weather],
  });
  const done = [];
  stream.on("tool_calls.function.arguments.done", (e) => done.push(e));
  const completion = await stream.finalChatCompletion();
  const choice = completion.choices[0];
  assert.equal(choice.finish_reason, "tool_calls");
  assert.equal(choice.message.tool_calls[0].function.name, "get_weather");
  assert.deepEqual(JSON.parse(choice.message.tool_calls[0].function.arguments), { city: "Paris" });
  assert.equal(done.length, 1);
  assert.equal(done[0].name, "get_weather");
});

test("runTools runs the tool and returns the model's answer, plain and streamed", async () => {
  for (const stream of [false, true]) {
    const seen = [];
    const runner = client().chat.completions.runTools({
      model: "chat",
      messages: [{ role: "user", content: "What is the weather in Paris?" }],
      stream,
      tools: [
        zodFunction({
          name: "get_weather",
          parameters: z.object({ city: z.string() }),
          function: ({ city }) => {
            seen.push(city);
            return `sunny in ${city}`;
          },
        }),
      ],
    });
    assert.equal(await runner.finalContent(), "The tool said: sunny in Paris");
    assert.deepEqual(seen, ["Paris"]);
  }
});

test("parse with a zod schema: response_format and a strict tool", async () => {
  // A test key answers a JSON schema with JSON valid for it, and calls a
  // forced tool with arguments valid for its parameters.
  const Forecast = z.object({ city: z.string(), days: z.number().int(), unit: z.enum(["c", "f"]) });
  const parsed = await client(testKey).chat.completions.parse({
    model: "chat",
    messages: [{ role: "user", content: "The forecast for Paris" }],
    response_format: zodResponseFormat(Forecast, "forecast"),
  });
  const value = parsed.choices[0].message.parsed;
  assert.deepEqual(Forecast.parse(value), value);
  assert.equal(parsed.choices[0].message.content, JSON.stringify(value));

  const called = await client(testKey).chat.completions.parse({
    model: "chat",
    messages: [{ role: "user", content: "The forecast for Paris" }],
    tools: [zodFunction({ name: "forecast", parameters: Forecast })],
    tool_choice: { type: "function", function: { name: "forecast" } },
  });
  const call = called.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, "forecast");
  assert.deepEqual(Forecast.parse(call.function.parsed_arguments), call.function.parsed_arguments);
});
