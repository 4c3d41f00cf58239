// Receiving Taskgate's webhooks: check a delivery's Standard Webhooks 1.0 signature and
// read its event. Synchronous, on node:crypto (the package targets Node.js 20+).

import { createHmac, timingSafeEqual } from "node:crypto";

import { TaskgateError } from "./errors.js";
import type { Task } from "./types.js";

/** How far, in seconds, a delivery's `webhook-timestamp` may be from the clock, either way. */
export const DEFAULT_WEBHOOK_TOLERANCE = 5 * 60;

/**
 * A delivery that cannot be trusted: a required header missing, no signature matching the
 * secret, a timestamp outside the tolerance, a secret that is not `whsec_` and base64, or a
 * signed body that is not a JSON object. Answer it with a 400.
 */
export class WebhookVerificationError extends TaskgateError {}

/** The events of a task's life that Taskgate sends. */
export type WebhookTaskEventType = "task.running" | "task.succeeded" | "task.failed" | "task.cancelled";
/** Every event type: the task events and `webhook.test`. */
export type WebhookEventType = WebhookTaskEventType | "webhook.test";

/**
 * A task as a webhook event carries it: as `GET /api/v1/tasks/{id}` shows it, without
 * `input`; `output` is left out when it was too large, and then `output_omitted` is `true`
 * (fetch the task for it).
 */
export type WebhookTask = Task & { output_omitted?: boolean };

/** What every event has: the body's `type` and `timestamp`, and the delivery's message id. */
interface WebhookEventBase {
  /** When the event happened (RFC 3339). */
  timestamp: string;
  /**
   * The `webhook-id` header (`msg_…`), the same on every retry and replay of this event: keep
   * it to process each event once. (Not part of the body.)
   */
  messageId: string;
}

/** A `task.*` event: `data` is the task. */
export interface WebhookTaskEvent extends WebhookEventBase {
  type: WebhookTaskEventType;
  data: WebhookTask;
}

/** A `webhook.test` event (`POST /webhook_endpoints/{id}/test`). */
export interface WebhookTestEvent extends WebhookEventBase {
  type: "webhook.test";
  data: { mode?: "live" | "test"; endpoint_id?: string; [key: string]: unknown };
}

/** A verified event: the parsed body `{type, timestamp, data}` plus `messageId`. Narrow on `type`. */
export type WebhookEvent = WebhookTaskEvent | WebhookTestEvent;

/** A request's headers: a Fetch `Headers`, or a plain object such as Node's `req.headers`. */
export type WebhookHeaders =
  | Headers
  | { get(name: string): string | null }
  | Record<string, string | string[] | undefined>;

export interface VerifyWebhookOptions {
  /** Seconds the timestamp may be from the clock, either way (default 300, the specification's). */
  tolerance?: number;
}

const SECRET_PREFIX = "whsec_";
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const TIMESTAMP = /^[0-9]{1,15}$/;

/**
 * Verifies a webhook delivery and returns its event; throws `WebhookVerificationError` when it
 * cannot be trusted.
 *
 * `payload` is the request's body exactly as received: read it raw (`await req.text()`,
 * `express.raw()`), never a re-serialized `JSON.stringify(req.body)`. `headers` are its
 * headers, looked up without regard to case. `secret` is the endpoint's signing secret,
 * `whsec_…` (the prefix may be left out, as the official libraries allow).
 *
 * Accepted when one of the `v1` signatures of `webhook-signature` (several, separated by
 * spaces, while a secret rotation overlaps) is the HMAC-SHA256 of
 * `{webhook-id}.{webhook-timestamp}.{payload}` under the secret, compared in constant time,
 * and `webhook-timestamp` is within `options.tolerance` seconds of now, either way.
 */
export function verifyWebhook(
  payload: string | Uint8Array | ArrayBuffer,
  headers: WebhookHeaders,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  const key = secretKey(secret);
  const tolerance = options.tolerance ?? DEFAULT_WEBHOOK_TOLERANCE;
  if (!(tolerance >= 0)) throw new RangeError("tolerance must be a number of seconds, 0 or more");
  const body = bytesOf(payload);

  const id = header(headers, "webhook-id");
  let timestamp = header(headers, "webhook-timestamp");
  const signatures = header(headers, "webhook-signature");
  const missing = (
    [
      ["webhook-id", id],
      ["webhook-timestamp", timestamp],
      ["webhook-signature", signatures],
    ] as const
  )
    .filter(([, value]) => !value || !value.trim())
    .map(([name]) => name);
  if (missing.length > 0 || id === undefined || timestamp === undefined || signatures === undefined) {
    throw new WebhookVerificationError(`missing webhook header(s): ${missing.join(", ")}`);
  }

  timestamp = timestamp.trim();
  if (!TIMESTAMP.test(timestamp)) throw new WebhookVerificationError("invalid webhook-timestamp header");
  const sent = Number(timestamp);
  const now = Date.now() / 1000;
  if (sent < now - tolerance) throw new WebhookVerificationError("message timestamp too old");
  if (sent > now + tolerance) throw new WebhookVerificationError("message timestamp too new");

  const expected = createHmac("sha256", key).update(`${id}.${timestamp}.`, "utf8").update(body).digest();
  let matched = false;
  // Several header lines come joined by ", " from a Fetch `Headers`: drop a trailing comma.
  for (const signature of signatures.split(" ").map((s) => s.replace(/,$/, ""))) {
    const comma = signature.indexOf(",");
    if (comma < 0 || signature.slice(0, comma) !== "v1") continue;
    const b64 = signature.slice(comma + 1);
    if (!BASE64.test(b64)) continue;
    const given = Buffer.from(b64, "base64");
    if (given.length === expected.length && timingSafeEqual(given, expected)) matched = true;
  }
  if (!matched) throw new WebhookVerificationError("no matching signature found");

  let event: unknown;
  try {
    event = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch (err) {
    throw new WebhookVerificationError(`the payload is not JSON: ${(err as Error).message}`);
  }
  if (typeof event !== "object" || event === null || Array.isArray(event)) {
    throw new WebhookVerificationError("the payload is not a JSON object");
  }
  return { ...(event as Omit<WebhookEvent, "messageId">), messageId: id } as WebhookEvent;
}

function secretKey(secret: string): Buffer {
  if (typeof secret !== "string") {
    throw new WebhookVerificationError("the webhook secret must be a string (whsec_…)");
  }
  let text = secret.trim();
  if (text.startsWith(SECRET_PREFIX)) text = text.slice(SECRET_PREFIX.length);
  if (!BASE64.test(text) || text.replace(/=+$/, "").length % 4 === 1) {
    throw new WebhookVerificationError("invalid webhook secret: not whsec_ and base64");
  }
  const key = Buffer.from(text, "base64");
  if (key.length === 0) throw new WebhookVerificationError("invalid webhook secret: empty");
  return key;
}

function bytesOf(payload: string | Uint8Array | ArrayBuffer): Uint8Array {
  if (typeof payload === "string") return Buffer.from(payload, "utf8");
  if (payload instanceof Uint8Array) return payload;
  if (payload instanceof ArrayBuffer) return new Uint8Array(payload);
  throw new TypeError("payload must be a string, a Uint8Array (Buffer) or an ArrayBuffer");
}

/** A header's value, whatever the case of its name; several values joined by spaces. */
function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === "function") {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  }
  const values: string[] = [];
  for (const [k, v] of Object.entries(headers as Record<string, string | string[] | undefined>)) {
    if (k.toLowerCase() !== name || v === undefined) continue;
    values.push(...(Array.isArray(v) ? v : [v]));
  }
  return values.length > 0 ? values.join(" ") : undefined;
}
