// tasks.stream: the real server's chat deltas, and the SSE reading rules against a stub.

import assert from "node:assert/strict";
import { test } from "node:test";

import Taskgate, {
  APIConnectionError,
  APITimeoutError,
  NotFoundError,
  TaskgateError,
  TaskStream,
} from "../dist/index.js";
import { env, stubServer } from "./helpers.mjs";

const CHAT = { messages: [{ role: "user", content: "Tell me a short story about a gate." }] };

test("a running chat task streams its deltas, then the final task", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({ api: "chat", input: CHAT, mode: "async", sandbox: { delay_ms: 1000 } });
  const stream = tg.tasks.stream(t.id);
  assert.ok(stream instanceof TaskStream);
  const events = [];
  for await (const event of stream) events.push(event);
  const last = events.at(-1);
  assert.equal(last.type, "done");
  assert.equal(last.task.id, t.id);
  assert.equal(last.task.status, "succeeded");
  const deltas = events.slice(0, -1);
  assert.ok(deltas.length >= 1);
  assert.ok(deltas.every((e) => e.type === "delta" && typeof e.text === "string"));
  assert.equal(deltas.map((e) => e.text).join(""), last.task.output.text);
});

test("collect() gives the whole text and the task; a finished task sends done at once", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({ api: "chat", input: CHAT, mode: "async", sandbox: { delay_ms: 300 } });
  const { text, task } = await tg.tasks.stream(t.id).collect();
  assert.equal(task.status, "succeeded");
  assert.equal(text, task.output.text);

  const finished = [];
  for await (const event of tg.tasks.stream(t.id)) finished.push(event);
  assert.equal(finished.length, 1);
  assert.equal(finished[0].type, "done");
  // A finished task sends no delta: collect() takes the text from the task.
  const late = await tg.tasks.stream(t.id).collect();
  assert.equal(late.text, task.output.text);

  // Not a chat task: only `done`.
  const other = await tg.call({ api: "sentiment", input: { text: "hi" } });
  const again = await tg.tasks.stream(other.id).collect();
  assert.equal(again.text, "");
  assert.equal(again.task.id, other.id);
});

test("breaking out of the loop closes the stream", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const t = await tg.call({ api: "chat", input: CHAT, mode: "async", sandbox: { delay_ms: 300 } });
  for await (const event of tg.tasks.stream(t.id)) {
    assert.ok(event.type === "delta" || event.type === "done");
    break;
  }
  const done = await tg.tasks.wait(t.id, { timeoutMs: 30000 });
  assert.equal(done.status, "succeeded");
});

test("a forced tool call streams as a tool_call event whose arguments are the task's", async () => {
  const tg = new Taskgate({ apiKey: env.testKey });
  const weather = {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
  };
  const input = {
    ...CHAT,
    tools: [{ name: "get_weather", parameters: weather }],
    tool_choice: { name: "get_weather" },
  };
  const t = await tg.call({ api: "chat", input, mode: "async", sandbox: { delay_ms: 300 } });
  const calls = [];
  let done;
  for await (const event of tg.tasks.stream(t.id)) {
    if (event.type === "tool_call") {
      const call = (calls[event.index] ??= { id: "", name: "", arguments: "" });
      if (event.id !== undefined) call.id = event.id;
      if (event.name !== undefined) call.name = event.name;
      call.arguments += event.arguments_delta;
    } else if (event.type === "done") {
      done = event.task;
    }
  }
  assert.equal(done.status, "succeeded");
  const stored = done.output.tool_calls;
  assert.equal(stored.length, 1);
  assert.deepEqual(
    calls.map((c) => ({ id: c.id, name: c.name, arguments: JSON.parse(c.arguments) })),
    stored,
  );
});

test("the stream of an unknown task is NotFoundError", async () => {
  const tg = new Taskgate();
  await assert.rejects(tg.tasks.stream("task_01JD2W3KX7ZZZZZZZZZZZZZZZZ").collect(), (err) => {
    assert.ok(err instanceof NotFoundError);
    assert.equal(err.code, "task_not_found");
    return true;
  });
});

/** A stub that sends `pieces` one by one, each in its own write. */
async function sseStub(pieces, { end = true } = {}) {
  return stubServer(async (req, res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    for (const piece of pieces) {
      res.write(piece);
      await new Promise((r) => setTimeout(r, 5));
    }
    if (end) res.end();
  });
}

test("SSE: comments, CRLF and CR line ends, multi-line data, split chunks, unknown events", async () => {
  const task = { id: "task_x", status: "succeeded", output: { text: "a\nb c" } };
  const stub = await sseStub([
    ": keep-alive\n\n",
    "event: delta\r\ndata: {\"text\"",
    ": \"a\\nb\"}\r\n\r",
    "\n: another comment\n",
    "event: ping\ndata: {}\n\n",
    "event: delta\rdata:{\"text\": \" c\"}\r\r",
    "event: done\ndata: {\"id\": \"task_x\",\ndata: \"status\": \"succeeded\",\n",
    `data: "output": ${JSON.stringify(task.output)}}\n\n`,
    "event: delta\ndata: {\"text\": \"never read\"}\n\n",
  ]);
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    const events = [];
    for await (const e of tg.tasks.stream("task_x")) events.push(e);
    assert.deepEqual(events, [
      { type: "delta", text: "a\nb" },
      { type: "delta", text: " c" },
      { type: "done", task },
    ]);
    assert.equal(stub.requests[0].headers.accept, "text/event-stream");
    assert.equal(stub.requests[0].url, "/api/v1/tasks/task_x/stream");
  } finally {
    await stub.close();
  }
});

test("SSE: reasoning with its signature, interleaved tool calls assembled by index, then done", async () => {
  const output = {
    text: "Let me look.",
    reasoning: "Weather in two cities.",
    tool_calls: [
      { id: "call_a", name: "get_weather", arguments: { city: "Paris" } },
      { id: "call_b", name: "get_time", arguments: { tz: "Europe/Rome" } },
    ],
    finish_reason: "tool_calls",
    model: "m",
  };
  const task = { id: "task_x", status: "succeeded", output };
  const sse = (event, data) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
  const stub = await sseStub([
    sse("reasoning", { text: "Weather in " }),
    sse("reasoning", { text: "two cities." }),
    sse("reasoning", { text: "", signature: "sig-1" }),
    sse("reasoning", { text: "", redacted: "enc-1" }),
    sse("delta", { text: "Let me look." }),
    sse("tool_call", { index: 0, id: "call_a", name: "get_weather", arguments_delta: "{\"ci" }),
    sse("tool_call", { index: 1, id: "call_b", name: "get_time", arguments_delta: "" }),
    sse("tool_call", { index: 0, arguments_delta: "ty\": \"Paris\"}" }),
    sse("tool_call", { index: 1, arguments_delta: "{\"tz\": \"Europe/Rome\"}" }),
    "event: done\ndata: " + JSON.stringify(task) + "\n\n",
  ]);
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    const events = [];
    for await (const e of tg.tasks.stream("task_x")) events.push(e);
    assert.deepEqual(events, [
      { type: "reasoning", text: "Weather in " },
      { type: "reasoning", text: "two cities." },
      { type: "reasoning", text: "", signature: "sig-1" },
      { type: "reasoning", text: "", redacted: "enc-1" },
      { type: "delta", text: "Let me look." },
      { type: "tool_call", index: 0, id: "call_a", name: "get_weather", arguments_delta: "{\"ci" },
      { type: "tool_call", index: 1, id: "call_b", name: "get_time", arguments_delta: "" },
      { type: "tool_call", index: 0, arguments_delta: "ty\": \"Paris\"}" },
      { type: "tool_call", index: 1, arguments_delta: "{\"tz\": \"Europe/Rome\"}" },
      { type: "done", task },
    ]);

    // Assembled as the README shows: the reasoning joined, each index's fragments joined.
    let reasoning = "";
    const calls = [];
    for (const e of events) {
      if (e.type === "reasoning") reasoning += e.text;
      if (e.type === "tool_call") {
        const call = (calls[e.index] ??= { id: "", name: "", arguments: "" });
        if (e.id !== undefined) call.id = e.id;
        if (e.name !== undefined) call.name = e.name;
        call.arguments += e.arguments_delta;
      }
    }
    assert.equal(reasoning, output.reasoning);
    assert.deepEqual(
      calls.map((c) => ({ ...c, arguments: JSON.parse(c.arguments) })),
      output.tool_calls,
    );

    // collect() still gives the text (the deltas only) and the task.
    const collected = await tg.tasks.stream("task_x").collect();
    assert.deepEqual(collected, { text: "Let me look.", task });
  } finally {
    await stub.close();
  }
});

test("SSE: a tool_call event without a valid index is TaskgateError", async () => {
  const stub = await sseStub(["event: tool_call\ndata: {\"arguments_delta\": \"{}\"}\n\n"]);
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    await assert.rejects(tg.tasks.stream("task_x").collect(), (err) => {
      assert.ok(err instanceof TaskgateError);
      assert.ok(!(err instanceof APIConnectionError));
      assert.match(err.message, /index/);
      return true;
    });
  } finally {
    await stub.close();
  }
});

test("SSE: a stream that ends before done is APIConnectionError", async () => {
  const stub = await sseStub(["event: delta\ndata: {\"text\": \"hi\"}\n\n", "event: done\ndata: {"]);
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url });
    const events = [];
    await assert.rejects(
      (async () => {
        for await (const e of tg.tasks.stream("task_x")) events.push(e);
      })(),
      APIConnectionError,
    );
    assert.deepEqual(events, [{ type: "delta", text: "hi" }]);
  } finally {
    await stub.close();
  }
});

test("SSE: silence longer than the timeout is APITimeoutError", async () => {
  const stub = await sseStub([": keep-alive\n\n"], { end: false });
  try {
    const tg = new Taskgate({ apiKey: "tg_x", baseURL: stub.url, timeout: 300 });
    await assert.rejects(tg.tasks.stream("task_x").collect(), APITimeoutError);
  } finally {
    await stub.close();
  }
});
