// The Vercel AI SDK (`ai`, with its `@ai-sdk/openai` and `@ai-sdk/anthropic`
// providers) against Taskgate's /openai/v1 and /anthropic/v1.
// Run through scripts/with-server.sh (it provides the server, the fake
// upstream and the keys):
//   scripts/with-server.sh node --test e2e/ai-sdk.test.mjs
//
// The `chat` API's upstream is the fake OpenAI
// (crates/taskgate-providers/examples/fake_openai.rs): offered tools, it
// calls one; given the tool's result, it answers "The tool said: " and that
// result. So a live key runs the SDK's agent loop to its end. Taskgate serves
// Chat Completions, not the Responses API: the OpenAI provider's `.chat(model)`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateText, streamText, stepCountIs, tool, Output } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import { createAnthropic } from "@ai-sdk/anthropic";
import { z } from "zod";

const server = process.env.TASKGATE_SERVER_URL;
const live = process.env.TASKGATE_API_KEY;
const testKey = process.env.TASKGATE_TEST_KEY;
const openai = (apiKey = live) => createOpenAI({ baseURL: `${server}/openai/v1`, apiKey });
const anthropic = (apiKey = live) => createAnthropic({ baseURL: `${server}/anthropic/v1`, apiKey });
const prompt = "What is the weather in Paris?";
const models = {
  "openai.chat": () => openai().chat("chat"),
  anthropic: () => anthropic()("chat"),
};

/** The weather tool; the cities it was called for go into `seen`. */
function getWeather(seen) {
  return tool({
    description: "The weather in a city",
    inputSchema: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      seen.push(city);
      return `sunny in ${city}`;
    },
  });
}

for (const [name, model] of Object.entries(models)) {
  test(`${name}: generateText runs the tool, then the model answers`, async () => {
    const seen = [];
    const result = await generateText({
      model: model(),
      tools: { get_weather: getWeather(seen) },
      stopWhen: stepCountIs(5),
      maxRetries: 0,
      prompt,
    });
    assert.deepEqual(seen, ["Paris"]);
    assert.equal(result.steps.length, 2);
    assert.equal(result.steps[0].finishReason, "tool-calls");
    assert.deepEqual(result.steps[0].toolCalls[0].input, { city: "Paris" });
    assert.equal(result.text, "The tool said: sunny in Paris");
    assert.equal(result.finishReason, "stop");
    assert.equal(result.totalUsage.inputTokens, 20);
  });

  test(`${name}: streamText streams the tool call, its result and the answer`, async () => {
    const seen = [];
    const result = streamText({
      model: model(),
      tools: { get_weather: getWeather(seen) },
      stopWhen: stepCountIs(5),
      maxRetries: 0,
      prompt,
    });
    const parts = [];
    let text = "";
    for await (const part of result.fullStream) {
      parts.push(part.type);
      if (part.type === "text-delta") text += part.text;
      if (part.type === "error") throw part.error;
    }
    assert.deepEqual(seen, ["Paris"]);
    assert.ok(parts.includes("tool-call") && parts.includes("tool-result"), parts.join(" "));
    assert.equal(text, "The tool said: sunny in Paris");
    assert.equal(await result.text, text);
    assert.equal((await result.steps).length, 2);
  });
}

test("openai.chat: structured output with a zod schema", async () => {
  // A test key answers a JSON schema with JSON valid for it.
  const Forecast = z.object({ city: z.string(), days: z.number().int(), unit: z.enum(["c", "f"]) });
  const result = await generateText({
    model: openai(testKey).chat("chat"),
    output: Output.object({ schema: Forecast }),
    maxRetries: 0,
    prompt: "The forecast for Paris",
  });
  assert.deepEqual(Forecast.parse(result.output), result.output);
});
