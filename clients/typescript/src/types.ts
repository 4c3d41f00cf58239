// Friendly names for the wire types generated from the OpenAPI document
// (src/generated/schema.ts; `npm run generate` remakes it).

import type { components } from "./generated/schema.js";

type Schemas = components["schemas"];

/** A task (`GET /call/{id}`; in list items `output` is absent). */
export type Task = Schemas["Task"];
/** A task with its `input`, `key_id`, `idempotency_key`, `events` and `attempts` (`GET /tasks/{id}`). */
export type TaskDetail = Schemas["TaskDetails"];
/** A task's status: `queued`, `running`, `succeeded`, `failed` or `cancelled`. */
export type TaskStatus = Schemas["Status"];
/** A task's usage and cost. */
export type Usage = Schemas["Usage"];
/** Why a task failed: `{code, message, upstream_status}`. */
export type TaskError = Schemas["TaskError"];
/** One transition of a task: `{status, at, message}`. */
export type TaskEvent = Schemas["Event"];
/** One upstream attempt of a task. */
export type TaskAttempt = Schemas["Attempt"];
/** A page of `GET /tasks` as the wire has it. */
export type TaskList = Schemas["TaskList"];
/** An API of the catalog, as `GET /apis` lists it. */
export type Api = Schemas["ApiSummary"];
/** An API with its `input_schema`, `output_schema`, `examples` and `limits` (`GET /apis/{slug}`). */
export type ApiDetail = Schemas["ApiDetails"];
/** A page of `GET /apis` as the wire has it. */
export type ApiList = Schemas["ApiList"];
/** An API's price. */
export type Pricing = Schemas["Pricing"];
/** An API's limits: `{timeout_ms, max_input_bytes}`. */
export type ApiLimits = Schemas["Limits"];
/** One example of an API: `{input, output}`. */
export type ApiExample = Schemas["Example"];
/**
 * A call's `sandbox` (test keys only): simulate a slow, failing or hanging task. Written by
 * hand: the document's schema (an object plus an `anyOf` with a `not`) comes out of the
 * generator as `unknown`. The fields are those of `components["schemas"]["Sandbox"]`.
 */
export interface Sandbox {
  /** Delay the outcome by this many milliseconds (0 to 600000). */
  delay_ms?: number;
  /** `succeeded` (default), `failed` (with `error_code`), or `timeout` (hang until `timeout_ms`). */
  outcome?: "succeeded" | "failed" | "timeout";
  /** With `outcome: "failed"`: the task's error code (default `upstream_error`). */
  error_code?:
    | "upstream_error"
    | "upstream_timeout"
    | "invalid_upstream_response"
    | "timeout"
    | "internal_error"
    | "rate_limited_upstream";
}
/** A webhook endpoint (`secret` only in the answer of `webhookEndpoints.create`). */
export type WebhookEndpoint = Schemas["WebhookEndpoint"];
/** One event's delivery, with its attempts. */
export type WebhookDelivery = Schemas["WebhookDelivery"];
/** One attempt at a delivery. */
export type WebhookDeliveryAttempt = Schemas["WebhookDeliveryAttempt"];
/** `pending`, `succeeded`, `failed` or `exhausted`. */
export type WebhookDeliveryStatus = Schemas["WebhookDeliveryStatus"];
/** An event an endpoint can subscribe to: `task.running`, `task.succeeded`, … `webhook.test`. */
export type WebhookEventName = Schemas["WebhookEventType"];
/** A page of `GET /webhook_endpoints` as the wire has it. */
export type WebhookEndpointList = Schemas["WebhookEndpointList"];
/** A page of `GET /webhook_deliveries` as the wire has it. */
export type WebhookDeliveryList = Schemas["WebhookDeliveryList"];
/** A call's own webhook: its task's events go to `url`, signed with the account's signing secret. */
export interface CallWebhook {
  url: string;
  /** Default: `task.succeeded`, `task.failed`, `task.cancelled`. */
  events?: Array<"task.running" | "task.succeeded" | "task.failed" | "task.cancelled"> | null;
}
/** A call's `metadata`: string keys and values, or `null` for none. */
export type Metadata = Schemas["Metadata"];
/** The error envelope of every failed request. */
export type ErrorEnvelope = Schemas["ErrorEnvelope"];

/**
 * The input of an API of kind `chat` (any chat API of your server): `messages`, and optionally
 * `tools`, `tool_choice`, `response_format`, `reasoning`, `max_tokens`, … Pass it as `input`.
 */
export type ChatInput = Schemas["ChatInput"];
/** The output of a chat task: `{ text, tool_calls, json?, reasoning?, finish_reason, model }`. */
export type ChatOutput = Schemas["ChatOutput"];
/** A message of a chat conversation, by `role`: `system`, `user`, `assistant` or `tool`. */
export type ChatMessage = Schemas["ChatMessage"];
/** A part of a user message's content: text, an image or a document. */
export type ChatContentPart = Schemas["ChatContentPart"];
/** A tool (function) the model may call: `{ name, description?, parameters? }`. */
export type ChatTool = Schemas["ChatTool"];
/** A call of a tool by the model: `{ id, name, arguments }` (`arguments` an object). */
export type ChatToolCall = Schemas["ChatToolCall"];
/** `"auto"`, `"none"`, `"required"` or `{ name }`. */
export type ChatToolChoice = Schemas["ChatToolChoice"];
/** The reply's form: `{ type: "text" | "json_object" }` or `{ type: "json_schema", name, schema, strict? }`. */
export type ChatResponseFormat = Schemas["ChatResponseFormat"];
/** Reasoning before the answer: `{ effort }` or `{ max_tokens }`. */
export type ChatReasoning = Schemas["ChatReasoning"];
/** The data of a stream's `tool_call` event: a fragment of a tool call. */
export type StreamToolCall = Schemas["StreamToolCall"];
/**
 * The data of a stream's `reasoning` event: a piece of the model's reasoning; or, with `text`
 * empty, the provider's `signature` over the reasoning so far, or a block it gives encrypted
 * only (`redacted`).
 */
export type StreamReasoning = Schemas["StreamReasoning"];
export type ChatReasoningDetail = Schemas["ChatReasoningDetail"];

/** The terminal statuses: a task in one of them never changes again. */
export const TERMINAL_STATUSES: readonly TaskStatus[] = ["succeeded", "failed", "cancelled"];

/**
 * One event of `tasks.stream`, in the order the model generates them: a piece of text
 * (`delta`), a piece of reasoning (`reasoning`, with its optional `signature` or `redacted`),
 * a fragment of a tool call (`tool_call`: `index`, `id` and `name` on an index's first fragment,
 * `arguments_delta`), then the final task (`done`). Other kinds may come in later versions:
 * test `type` rather than assume that what is not a `delta` is the `done`.
 */
export type StreamEvent =
  | { type: "delta"; text: string }
  | ({ type: "reasoning" } & StreamReasoning)
  | ({ type: "tool_call" } & StreamToolCall)
  | { type: "done"; task: Task };

/** The APIs the OpenAPI document describes (the built-in catalog), e.g. `"sentiment"`. */
export type KnownApi = {
  [K in keyof Schemas]: K extends `${infer Slug}.input` ? Slug : never;
}[keyof Schemas];

/**
 * The `input` of an API: its generated schema for the APIs the document describes
 * (`ApiInput<"sentiment">` is `{ text: string }`), any JSON object for the others
 * (APIs configured on a server, such as `chat`).
 */
export type ApiInput<A extends string> = `${A}.input` extends keyof Schemas
  ? Schemas[`${A}.input`]
  : Record<string, unknown>;
