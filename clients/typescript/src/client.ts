// The client: its options and defaults, `call`, and the `tasks` and `apis` resources.

import { Transport, type FetchLike, type RateLimitInfo, type RequestOptions } from "./core.js";
import { TaskgateError } from "./errors.js";
import { Apis } from "./resources/apis.js";
import { Tasks } from "./resources/tasks.js";
import { WebhookDeliveries, WebhookEndpoints } from "./resources/webhooks.js";
import type { ApiInput, CallWebhook, Metadata, Sandbox, Task } from "./types.js";
import { VERSION } from "./version.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8080/api/v1";
export const DEFAULT_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_RETRIES = 2;

/** Options of `new Taskgate(...)`; every one is optional. */
export interface ClientOptions {
  /** The API key; default: the environment variable `TASKGATE_API_KEY`. */
  apiKey?: string | undefined;
  /** `http://HOST:PORT/api/v1`; default: `TASKGATE_BASE_URL`, else `http://127.0.0.1:8080/api/v1`. */
  baseURL?: string | undefined;
  /** Milliseconds per request attempt (default 60000). */
  timeout?: number | undefined;
  /** Retries of a failed request (default 2; 0 turns retries off). */
  maxRetries?: number | undefined;
  /** A `fetch` to use instead of the global one (for proxies, tests, instrumentation). */
  fetch?: FetchLike | typeof fetch | undefined;
  /** Headers sent with every request. */
  defaultHeaders?: Record<string, string> | undefined;
}

/** The body of `call`. */
export interface CallParams<A extends string = string> {
  /** The API's slug, e.g. `"sentiment"`. */
  api: A;
  /**
   * The API's input (its `input_schema`), e.g. `{ text: "I love this" }`: typed from the
   * document for the APIs it describes, any JSON object for the others.
   */
  input: ApiInput<A>;
  /** `sync` (default): wait for the task; `async`: return at once (the task is `queued` or `running`). */
  mode?: "sync" | "async" | undefined;
  /** Your own labels: up to 16 string keys with string values; `null` for none. */
  metadata?: Metadata | undefined;
  /** The task's execution deadline in milliseconds (at most the API's `limits.timeout_ms`). */
  timeoutMs?: number | undefined;
  /** The `Idempotency-Key` header. Without one (and with retries on), the client makes one up. */
  idempotencyKey?: string | undefined;
  /** Test keys only: simulate a slow, failing or hanging task, e.g. `{ delay_ms: 5000 }`. */
  sandbox?: Sandbox | undefined;
  /** This call's own webhook, e.g. `{ url: "https://example.com/hook", events: ["task.succeeded"] }`. */
  webhook?: CallWebhook | null | undefined;
}

function env(name: string): string | undefined {
  const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
  return value === undefined || value === "" ? undefined : value;
}

/** The Taskgate client: `const tg = new Taskgate()`. */
export class Taskgate {
  /** The library's version. */
  static readonly VERSION = VERSION;

  /** Tasks: get, cancel, wait, list, listPage, stream. */
  readonly tasks: Tasks;
  /** The catalog: get, list, listPage. */
  readonly apis: Apis;
  /** Webhook endpoints: create, list, get, update, delete, secret, rotateSecret, test; the calls' signing secret. */
  readonly webhookEndpoints: WebhookEndpoints;
  /** The webhook delivery log: list, listPage, get, retry. */
  readonly webhookDeliveries: WebhookDeliveries;
  readonly #t: Transport;

  constructor(options: ClientOptions = {}) {
    const apiKey = options.apiKey ?? env("TASKGATE_API_KEY");
    if (!apiKey) {
      throw new TaskgateError(
        "No API key: pass `apiKey` to `new Taskgate({ apiKey })` or set the TASKGATE_API_KEY environment variable.",
      );
    }
    const baseURL = (options.baseURL ?? env("TASKGATE_BASE_URL") ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    const timeout = options.timeout ?? DEFAULT_TIMEOUT_MS;
    if (!Number.isFinite(timeout) || timeout <= 0) {
      throw new TaskgateError(`\`timeout\` must be a positive number of milliseconds, not ${timeout}.`);
    }
    const maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    if (!Number.isInteger(maxRetries) || maxRetries < 0) {
      throw new TaskgateError(`\`maxRetries\` must be a whole number >= 0, not ${maxRetries}.`);
    }
    const fetchImpl = options.fetch ?? globalThis.fetch;
    if (typeof fetchImpl !== "function") {
      throw new TaskgateError("No `fetch` available: use Node.js 20 or later, or pass the `fetch` option.");
    }
    this.#t = new Transport({
      apiKey,
      baseURL,
      timeout,
      maxRetries,
      userAgent: `taskgate-typescript/${VERSION}`,
      fetch: (input, init) => (fetchImpl as FetchLike)(input, init),
      headers: { ...options.defaultHeaders },
    });
    this.tasks = new Tasks(this.#t);
    this.apis = new Apis(this.#t);
    this.webhookEndpoints = new WebhookEndpoints(this.#t);
    this.webhookDeliveries = new WebhookDeliveries(this.#t);
  }

  /** The API key in use. */
  get apiKey(): string {
    return this.#t.apiKey;
  }

  /** The base URL in use, without a trailing slash. */
  get baseURL(): string {
    return this.#t.baseURL;
  }

  /** Milliseconds per request attempt. */
  get timeout(): number {
    return this.#t.timeout;
  }

  /** Retries of a failed request. */
  get maxRetries(): number {
    return this.#t.maxRetries;
  }

  /**
   * The rate-limit headers of the last answer (`X-RateLimit-Limit`, `-Remaining`, `-Reset`,
   * `RateLimit-Policy`, `RateLimit`); fields are `undefined` when the answer had none
   * (plans without limits send none).
   */
  get lastRateLimit(): RateLimitInfo {
    return this.#t.lastRateLimit;
  }

  /** The `X-Request-Id` of the last answer. */
  get lastRequestId(): string | undefined {
    return this.#t.lastRequestId;
  }

  /**
   * Creates and executes a task (`POST /call`). Sync (default) returns the finished task,
   * whatever its status (a task still running after the server's sync wait comes back
   * `running`); `mode: "async"` returns at once. Retried only under an Idempotency-Key:
   * yours, or one made for this call when you gave none.
   */
  call<A extends string>(params: CallParams<A>, options?: RequestOptions): Promise<Task> {
    const body: Record<string, unknown> = { api: params.api, input: params.input };
    if (params.mode !== undefined) body["mode"] = params.mode;
    if (params.metadata !== undefined) body["metadata"] = params.metadata;
    if (params.timeoutMs !== undefined) body["timeout_ms"] = params.timeoutMs;
    if (params.sandbox !== undefined) body["sandbox"] = params.sandbox;
    if (params.webhook !== undefined) body["webhook"] = params.webhook;
    const maxRetries = options?.maxRetries ?? this.#t.maxRetries;
    // The same key on every attempt: the server answers a repeat with the original
    // answer instead of executing it twice (Stripe's libraries do the same).
    const idempotencyKey = params.idempotencyKey ?? (maxRetries > 0 ? crypto.randomUUID() : undefined);
    return this.#t.json<Task>({
      method: "POST",
      path: "/call",
      body,
      idempotencyKey,
      retryable: idempotencyKey !== undefined,
      options,
    });
  }
}
