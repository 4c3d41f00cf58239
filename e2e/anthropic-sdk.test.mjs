// The official `@anthropic-ai/sdk` Node package against Taskgate's /anthropic/v1.
// Run through scripts/with-server.sh (it provides the server, the fake
// upstream and the keys):
//   scripts/with-server.sh node --test e2e/anthropic-sdk.test.mjs
//
// The `chat` API's upstream is the fake OpenAI
// (crates/taskgate-providers/examples/fake_openai.rs): a fixed reply; offered
// tools, a call of one; given a tool's result, "The tool said: " and it; asked
// to reason, its reasoning too. So a live key runs an agent's turns as a model
// would, and the fake shows what Taskgate sent it.
import { test } from "node:test";
import assert from "node:assert/strict";
import Anthropic from "@anthropic-ai/sdk";

const server = process.env.TASKGATE_SERVER_URL;
const fake = process.env.TASKGATE_FAKE_OPENAI_URL;
const live = process.env.TASKGATE_API_KEY;
const testKey = process.env.TASKGATE_TEST_KEY;
const reply = "Hello! How can I help you today?";
const reasoning = "The user wants an answer; I will give it.";
const messages = [{ role: "user", content: "Say hello." }];
// What ANTHROPIC_BASE_URL is set to: the SDK adds /v1/messages.
const client = (apiKey = live, opts = {}) =>
  new Anthropic({ apiKey, baseURL: `${server}/anthropic`, maxRetries: 0, ...opts });
const weather = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

/** The body of the chat request the fake upstream received last. */
async function upstreamSaw() {
  return (await fetch(`${fake}/_fake/last_chat_request`)).json();
}

async function task(id, key = live) {
  const r = await fetch(`${server}/api/v1/tasks/${id}`, { headers: { authorization: `Bearer ${key}` } });
  return (await r.json()).data;
}

test("a message is a task", async () => {
  const { data, response } = await client()
    .messages.create({ model: "chat", max_tokens: 100, system: "Be brief.", messages })
    .withResponse();
  assert.equal(data.type, "message");
  assert.equal(data.role, "assistant");
  assert.deepEqual(data.content, [{ type: "text", text: reply }]);
  assert.equal(data.stop_reason, "end_turn");
  assert.equal(data.model, "chat");
  assert.equal(data.usage.input_tokens, 10);
  assert.equal(data.usage.output_tokens, 9);
  const id = response.headers.get("x-taskgate-task-id");
  assert.equal(data.id, "msg_" + id.replace(/^task_/, ""));
  const stored = await task(id);
  assert.equal(stored.status, "succeeded");
  assert.equal(stored.output.text, reply);
  const sent = await upstreamSaw();
  assert.deepEqual(sent.messages[0], { role: "system", content: "Be brief." });
});

test("the messages.stream helper", async () => {
  const events = [];
  let text = "";
  const stream = client()
    .messages.stream({ model: "chat", max_tokens: 100, messages })
    .on("streamEvent", (e) => events.push(e.type))
    .on("text", (t) => (text += t));
  const message = await stream.finalMessage();
  assert.equal(text, reply);
  assert.deepEqual(message.content.map((b) => [b.type, b.text]), [["text", reply]]);
  assert.equal(message.stop_reason, "end_turn");
  assert.equal(message.usage.output_tokens, 9);
  assert.equal(events[0], "message_start");
  assert.equal(events.at(-1), "message_stop");
  for (const e of ["content_block_start", "content_block_delta", "content_block_stop", "message_delta"]) {
    assert.ok(events.includes(e), `${e} in ${events}`);
  }
});

test("a tool use round trip: tool_use, tool_result, the answer", async () => {
  const convo = [{ role: "user", content: "What is the weather in Paris?" }];
  const first = await client().messages.create({ model: "chat", max_tokens: 200, messages: convo, tools: [weather] });
  assert.equal(first.stop_reason, "tool_use");
  const use = first.content.find((b) => b.type === "tool_use");
  assert.equal(use.name, "get_weather");
  assert.deepEqual(use.input, { city: "Paris" });
  assert.ok(use.id);
  let sent = await upstreamSaw();
  assert.equal(sent.tools[0].function.name, "get_weather");
  assert.deepEqual(sent.tools[0].function.parameters, weather.input_schema);

  convo.push(
    { role: "assistant", content: first.content },
    { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny, 21 C" }] },
  );
  const second = await client().messages.create({ model: "chat", max_tokens: 200, messages: convo, tools: [weather] });
  assert.equal(second.stop_reason, "end_turn");
  assert.deepEqual(second.content, [{ type: "text", text: "The tool said: sunny, 21 C" }]);
  sent = await upstreamSaw();
  const [assistant, tool] = sent.messages.slice(-2);
  assert.equal(assistant.tool_calls[0].id, use.id);
  assert.deepEqual(JSON.parse(assistant.tool_calls[0].function.arguments), { city: "Paris" });
  assert.deepEqual(tool, { role: "tool", tool_call_id: use.id, content: "sunny, 21 C" });
});

test("a streamed tool use: input_json_delta assembled by the helper", async () => {
  const stream = client().messages.stream({
    model: "chat",
    max_tokens: 200,
    messages: [{ role: "user", content: "What is the weather in Paris?" }],
    tools: [weather],
  });
  const partials = [];
  stream.on("inputJson", (partial) => partials.push(partial));
  const message = await stream.finalMessage();
  assert.equal(message.stop_reason, "tool_use");
  const use = message.content.find((b) => b.type === "tool_use");
  assert.equal(use.name, "get_weather");
  assert.deepEqual(use.input, { city: "Paris" });
  assert.ok(partials.length >= 1);
});

test("a test key's forced tool is called with arguments for its schema", async () => {
  const message = await client(testKey).messages.create({
    model: "chat",
    max_tokens: 200,
    messages: [{ role: "user", content: "Weather?" }],
    tools: [weather],
    tool_choice: { type: "tool", name: "get_weather" },
  });
  assert.equal(message.stop_reason, "tool_use");
  const use = message.content.find((b) => b.type === "tool_use");
  assert.equal(typeof use.input.city, "string");
});

test("an image block reaches the upstream as an image part", async () => {
  // A 1x1 PNG.
  const png =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
  const message = await client().messages.create({
    model: "chat",
    max_tokens: 100,
    messages: [
      {
        role: "user",
        content: [
          { type: "image", source: { type: "base64", media_type: "image/png", data: png } },
          { type: "text", text: "What is in this picture?" },
        ],
      },
    ],
  });
  assert.equal(message.content[0].text, reply);
  const sent = await upstreamSaw();
  assert.deepEqual(sent.messages[0].content, [
    { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } },
    { type: "text", text: "What is in this picture?" },
  ]);
});

test("thinking: the upstream's reasoning comes back as a thinking block, plain and streamed", async () => {
  const params = {
    model: "chat",
    max_tokens: 2048,
    thinking: { type: "enabled", budget_tokens: 1024 },
    messages,
  };
  const message = await client().messages.create(params);
  assert.equal(message.content[0].type, "thinking");
  assert.equal(message.content[0].thinking, reasoning);
  assert.equal(typeof message.content[0].signature, "string");
  assert.deepEqual(message.content[1], { type: "text", text: reply });
  const sent = await upstreamSaw();
  assert.ok(sent.reasoning_effort, JSON.stringify(sent));

  let thinking = "";
  const stream = client()
    .messages.stream(params)
    .on("thinking", (delta) => (thinking += delta));
  const streamed = await stream.finalMessage();
  assert.equal(thinking, reasoning);
  assert.deepEqual(
    streamed.content.map((b) => b.type),
    ["thinking", "text"],
  );
  assert.equal(streamed.content[0].thinking, reasoning);
  assert.equal(streamed.content[1].text, reply);

  // The thinking block goes back in the next turn, as Claude Code sends it.
  const next = await client().messages.create({
    ...params,
    messages: [...messages, { role: "assistant", content: message.content }, { role: "user", content: "Again." }],
  });
  assert.equal(next.content.at(-1).text, reply);
});

test("errors are in Anthropic's shape and raise the SDK's classes", async () => {
  await assert.rejects(
    client("tg_live_" + "x".repeat(40)).messages.create({ model: "chat", max_tokens: 10, messages }),
    (e) => {
      assert.ok(e instanceof Anthropic.AuthenticationError, e);
      assert.equal(e.status, 401);
      assert.equal(e.error.type, "error");
      assert.equal(e.error.error.type, "authentication_error");
      assert.ok(e.error.error.message);
      return true;
    },
  );
  await assert.rejects(client().messages.create({ model: "no-such-model", max_tokens: 10, messages }), (e) => {
    assert.ok(e instanceof Anthropic.NotFoundError, e);
    assert.equal(e.error.error.type, "not_found_error");
    return true;
  });
  await assert.rejects(
    client().messages.create({ model: "chat", max_tokens: 10, messages: [] }),
    (e) => {
      assert.ok(e instanceof Anthropic.BadRequestError, e);
      assert.equal(e.error.error.type, "invalid_request_error");
      return true;
    },
  );
});
