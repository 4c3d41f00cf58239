// Compiled (never run) by typing.test.mjs: the published declarations (dist/*.d.ts)
// as a TypeScript user sees them, under `strict`.

import Taskgate, {
  APIConnectionError,
  APIError,
  NotFoundError,
  RateLimitError,
  TaskgateError,
  WaitTimeoutError,
  type Api,
  type ApiDetail,
  type ChatInput,
  type ChatMessage,
  type ChatOutput,
  type ChatTool,
  type ApiInput,
  type Page,
  type RateLimitInfo,
  type StreamEvent,
  type Task,
  type TaskDetail,
  type TaskStatus,
  verifyWebhook,
  WebhookVerificationError,
  type WebhookEvent,
} from "../dist/index.js";

async function user(): Promise<void> {
  const tg = new Taskgate({ apiKey: "tg_x", baseURL: "http://127.0.0.1:8080/api/v1", timeout: 1000, maxRetries: 0 });
  const t: Task = await tg.call({ api: "sentiment", input: { text: "hi" } });
  const status: TaskStatus = t.status;
  const cost: string = t.usage.cost_usd;
  await tg.call({ api: "chat", input: { messages: [{ role: "user", content: "hi" }] }, mode: "async" });
  await tg.call({
    api: "token-count",
    input: { text: "x", encoding: "cl100k_base" },
    metadata: { k: "v" },
    timeoutMs: 100,
    idempotencyKey: "k",
    sandbox: { delay_ms: 1, outcome: "failed", error_code: "timeout" },
  });
  // @ts-expect-error sentiment's input needs `text`
  await tg.call({ api: "sentiment", input: {} });
  // @ts-expect-error mode is sync or async
  await tg.call({ api: "sentiment", input: { text: "x" }, mode: "later" });
  const input: ApiInput<"sentiment"> = { text: "typed" };
  void input;

  const d: TaskDetail = await tg.tasks.get(t.id);
  const events: string[] = d.events.map((e) => e.status);
  const done: Task = await tg.tasks.wait(t.id, { timeoutMs: 60000 });
  const cancelled: Task = await tg.tasks.cancel(t.id);
  for await (const item of tg.tasks.list({ limit: 10, status: ["failed", "cancelled"], order: "asc", createdAfter: new Date() })) {
    const id: string = item.id;
    void id;
  }
  const page: Page<Task> = await tg.tasks.listPage({ limit: 10 });
  const next: string | null = page.nextCursor;
  // The README's "Pagination": a page's nextCursor (string | null) is the next request's cursor.
  await tg.tasks.listPage({ limit: 10, cursor: page.nextCursor });
  const apiPage = await tg.apis.listPage({ limit: 2 });
  await tg.apis.listPage({ limit: 2, cursor: apiPage.nextCursor });
  for await (const item of tg.tasks.list({ cursor: page.nextCursor })) void item;
  for await (const event of tg.tasks.stream(t.id)) {
    const e: StreamEvent = event;
    if (event.type === "delta") {
      const text: string = event.text;
      void text;
    } else if (event.type === "reasoning") {
      const piece: string = event.text;
      const signature: string | undefined = event.signature;
      const redacted: string | undefined = event.redacted;
      void piece, signature, redacted;
    } else if (event.type === "tool_call") {
      const index: number = event.index;
      const id: string | undefined = event.id;
      const name: string | undefined = event.name;
      const args: string = event.arguments_delta;
      void index, id, name, args;
    } else {
      const final: Task = event.task;
      void final;
    }
    void e;
  }
  const { text, task } = await tg.tasks.stream(t.id).collect();
  const apis: Api[] = await tg.apis.list({ kind: "chat", limit: 2 }).toArray();
  const api: ApiDetail = await tg.apis.get("sentiment");
  const limits: number = api.limits.timeout_ms;
  const rl: RateLimitInfo = tg.lastRateLimit;
  const remaining: number | undefined = rl.remaining;
  const rid: string | undefined = tg.lastRequestId;
  void [status, cost, events, done, cancelled, next, text, task, apis, limits, remaining, rid];

  try {
    await tg.tasks.get("task_x");
  } catch (err) {
    if (err instanceof RateLimitError) {
      const after: number | undefined = err.retryAfter;
      void after;
    } else if (err instanceof APIError) {
      const fields: [number, string | undefined, string | undefined, string | null, string | undefined] = [
        err.status,
        err.code,
        err.type,
        err.param,
        err.requestId,
      ];
      void fields;
    } else if (err instanceof APIConnectionError || err instanceof WaitTimeoutError) {
      void err.message;
    } else if (err instanceof TaskgateError) {
      void err;
    }
  }

  // The README's "Errors" example: the base class reads the answer's fields too.
  try {
    await tg.tasks.get("task_01JD…");
  } catch (err) {
    if (err instanceof NotFoundError) console.log("no such task", err.requestId);
    else if (err instanceof RateLimitError) console.log(`retry in ${err.retryAfter} s`);
    else if (err instanceof TaskgateError) console.log(err.status, err.code, err.message);
    else throw err;
  }
  try {
    await tg.apis.get("x");
  } catch (err) {
    if (err instanceof TaskgateError) {
      const fields: [number | undefined, string | undefined, string | undefined, string | null | undefined, string | undefined, string | undefined] = [
        err.status,
        err.code,
        err.type,
        err.param,
        err.requestId,
        err.request_id,
      ];
      void fields;
    }
  }
}
void user;

// The README's "Tool calls" example, with the generated chat types.
declare function weatherIn(city: string): Promise<{ temp_c: number }>;
async function toolCalls(tg: Taskgate): Promise<void> {
  const getWeather: ChatTool = {
    name: "get_weather",
    description: "The current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  };
  const messages: ChatMessage[] = [{ role: "user", content: "What is the weather in Paris?" }];
  const first = await tg.call({
    api: "chat",
    input: { messages, tools: [getWeather], tool_choice: { name: "get_weather" } },
  });
  const { tool_calls } = first.output as ChatOutput; // finish_reason "tool_calls"
  messages.push({ role: "assistant", tool_calls });
  for (const call of tool_calls) {
    const result = await weatherIn(String(call.arguments["city"])); // your tool, e.g. { temp_c: 21 }
    messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify(result) });
  }
  const answer = await tg.call({ api: "chat", input: { messages, tools: [getWeather] } });
  console.log((answer.output as ChatOutput).text);
}
void toolCalls;

// A ChatInput is an input; what the kind refuses, the type refuses too.
const chatInput: ChatInput = {
  messages: [
    { role: "system", content: "Be brief." },
    { role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image", url: "https://example.com/a.png" }] },
  ],
  tool_choice: "auto",
  response_format: { type: "json_schema", name: "answer", schema: { type: "object" } },
  reasoning: { effort: "low" },
};
void chatInput;
// @ts-expect-error: a tool message names the call it answers
const noCallId: ChatMessage = { role: "tool", content: "21" };
void noCallId;

// A webhook receiver: the raw body, any headers, the event narrowed on its type.
function onWebhook(body: string | Buffer, headers: Headers | Record<string, string | string[] | undefined>): number {
  let event: WebhookEvent;
  try {
    event = verifyWebhook(body, headers, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", { tolerance: 300 });
  } catch (err) {
    if (err instanceof WebhookVerificationError) return 400;
    throw err;
  }
  const id: string = event.messageId;
  if (event.type === "task.succeeded") {
    const status: TaskStatus = event.data.status;
    const omitted: boolean | undefined = event.data.output_omitted;
    void [status, omitted, event.data.output, id];
  } else if (event.type === "webhook.test") {
    // @ts-expect-error: a test event carries no task
    void event.data.usage.units;
  }
  return 204;
}
void onWebhook;
