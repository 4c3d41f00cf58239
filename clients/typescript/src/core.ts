// The HTTP layer: one request with its timeout, the envelope, the error classes,
// and the retry policy (which requests, which failures, how long to wait).

import {
  APIConnectionError,
  APIError,
  APITimeoutError,
  APIUserAbortError,
  TaskgateError,
  errorClassFor,
  type APIErrorInit,
  type ErrorDetail,
} from "./errors.js";

/** Options that every method accepts as its last argument, overriding the client's. */
export interface RequestOptions {
  /** Milliseconds for this request (each attempt); default: the client's `timeout`. */
  timeout?: number | undefined;
  /** Retries for this request; default: the client's `maxRetries`. */
  maxRetries?: number | undefined;
  /** Stops the request (and any wait between retries) when aborted. */
  signal?: AbortSignal | undefined;
  /** Extra headers for this request. */
  headers?: Record<string, string> | undefined;
}

/** The rate-limit headers of an answer; each field is `undefined` when the header was absent. */
export interface RateLimitInfo {
  /** `X-RateLimit-Limit`: the limit of the window closest to exhaustion. */
  limit: number | undefined;
  /** `X-RateLimit-Remaining`: requests left in that window. */
  remaining: number | undefined;
  /** `X-RateLimit-Reset`: when that window has room again, in Unix seconds. */
  reset: number | undefined;
  /** `RateLimit-Policy`, as sent: the plan's windows, e.g. `"minute";q=60;w=60`. */
  policy: string | undefined;
  /** `RateLimit`, as sent: the window closest to exhaustion, e.g. `"minute";r=17;t=42`. */
  rateLimit: string | undefined;
}

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** What a resource asks of the client. */
export interface RequestSpec {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  /** Below the base URL, starting with "/". */
  path: string;
  query?: Record<string, string | number | undefined | null> | undefined;
  body?: unknown;
  /** Sent as `Idempotency-Key`, the same on every attempt. */
  idempotencyKey?: string | undefined;
  /** Whether a failed attempt may be repeated. */
  retryable: boolean;
  options?: RequestOptions | undefined;
}

/** An opened event stream: its body, and how long it may stay silent. */
export interface OpenStream {
  response: Response;
  /** Aborting it closes the connection. */
  controller: AbortController;
  /** Milliseconds of silence after which reading fails with APITimeoutError. */
  idleTimeout: number;
  /** Whether the caller's own signal stopped it. */
  userAborted: () => boolean;
}

const BACKOFF_START_MS = 500;
const BACKOFF_CAP_MS = 8_000;
/** A longer `Retry-After` is not waited for: the error is raised at once. */
const RETRY_AFTER_MAX_S = 60;

export function emptyRateLimit(): RateLimitInfo {
  return { limit: undefined, remaining: undefined, reset: undefined, policy: undefined, rateLimit: undefined };
}

function intHeader(headers: Headers, name: string): number | undefined {
  const raw = headers.get(name);
  if (raw === null || raw.trim() === "") return undefined;
  const n = Number(raw.trim());
  return Number.isFinite(n) ? n : undefined;
}

export function readRateLimit(headers: Headers): RateLimitInfo {
  return {
    limit: intHeader(headers, "x-ratelimit-limit"),
    remaining: intHeader(headers, "x-ratelimit-remaining"),
    reset: intHeader(headers, "x-ratelimit-reset"),
    policy: headers.get("ratelimit-policy") ?? undefined,
    rateLimit: headers.get("ratelimit") ?? undefined,
  };
}

/** `Retry-After` in seconds (delta-seconds or an HTTP date), or undefined if absent or unreadable. */
export function parseRetryAfter(headers: Headers): number | undefined {
  const raw = headers.get("retry-after")?.trim();
  if (!raw) return undefined;
  if (/^\d+(\.\d+)?$/.test(raw)) return Number(raw);
  const date = Date.parse(raw);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, (date - Date.now()) / 1000);
}

/** The exponential backoff before retry number `attempt + 1`: 0.5 s × 2^attempt, capped, with jitter. */
export function backoffMs(attempt: number): number {
  const base = Math.min(BACKOFF_START_MS * 2 ** attempt, BACKOFF_CAP_MS);
  // Up to a quarter less, so that clients failing together do not retry together.
  return base * (1 - Math.random() * 0.25);
}

/** Whether an error answer is worth repeating (the request itself may still be refused later). */
export function isRetryableStatus(status: number, code: string | undefined): boolean {
  if (status === 408 || status === 429 || status >= 500) return true;
  return status === 409 && code === "idempotency_in_progress";
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(new APIUserAbortError());
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(new APIUserAbortError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

/** Builds the error for an error answer, from the envelope when there is one. */
export function makeAPIError(status: number, headers: Headers, text: string): APIError {
  let body: unknown = text;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    // Not JSON (a proxy's page, say): keep the text.
  }
  const envelope = isRecord(body) ? body : {};
  const error = isRecord(envelope["error"]) ? envelope["error"] : {};
  const meta = isRecord(envelope["meta"]) ? envelope["meta"] : {};
  const details = Array.isArray(error["details"]) ? (error["details"] as ErrorDetail[]) : undefined;
  const init: APIErrorInit & { retryAfter?: number | undefined } = {
    status,
    type: str(error["type"]),
    code: str(error["code"]),
    message: str(error["message"]) ?? `HTTP ${status}${text && typeof body === "string" ? `: ${text.slice(0, 200)}` : ""}`,
    param: str(error["param"]) ?? null,
    details,
    requestId: str(meta["request_id"]) ?? headers.get("x-request-id") ?? undefined,
    headers,
    body,
    retryAfter: parseRetryAfter(headers),
  };
  const Class = errorClassFor(status);
  return new Class(init);
}

/** The client's HTTP engine; `Taskgate` holds one. */
export class Transport {
  readonly apiKey: string;
  readonly baseURL: string;
  readonly timeout: number;
  readonly maxRetries: number;
  readonly userAgent: string;
  lastRateLimit: RateLimitInfo = emptyRateLimit();
  lastRequestId: string | undefined;
  readonly #fetch: FetchLike;
  readonly #headers: Record<string, string>;

  constructor(init: {
    apiKey: string;
    baseURL: string;
    timeout: number;
    maxRetries: number;
    userAgent: string;
    fetch: FetchLike;
    headers: Record<string, string>;
  }) {
    this.apiKey = init.apiKey;
    this.baseURL = init.baseURL;
    this.timeout = init.timeout;
    this.maxRetries = init.maxRetries;
    this.userAgent = init.userAgent;
    this.#fetch = init.fetch;
    this.#headers = init.headers;
  }

  url(path: string, query?: RequestSpec["query"]): string {
    let url = this.baseURL + path;
    if (query) {
      const params = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v !== undefined && v !== null) params.append(k, String(v));
      }
      const qs = params.toString();
      if (qs) url += `?${qs}`;
    }
    return url;
  }

  /** Sends the request (with retries) and returns the envelope's `data`. */
  async json<T>(spec: RequestSpec): Promise<T> {
    const { response, body } = await this.#withRetries(spec, async (signal, timeout) => {
      const { response, release } = await this.#send(spec, signal, timeout);
      try {
        // The body is read under the same timeout as the headers.
        return { response, body: await response.text() };
      } catch (err) {
        throw release(err);
      } finally {
        release(undefined);
      }
    });
    const requestId = response.headers.get("x-request-id") ?? undefined;
    let envelope: unknown;
    try {
      envelope = JSON.parse(body);
    } catch {
      envelope = undefined;
    }
    if (!isRecord(envelope) || !("data" in envelope)) {
      throw new APIError({
        status: response.status,
        message: `The server's answer (HTTP ${response.status}) was not a Taskgate envelope.`,
        requestId,
        headers: response.headers,
        body: envelope ?? body,
      });
    }
    return envelope["data"] as T;
  }

  /**
   * Opens an event stream (with retries until it is open). The timeout covers the wait for
   * the answer's headers; afterwards it bounds each silence between two chunks.
   */
  async stream(spec: RequestSpec): Promise<OpenStream> {
    return this.#withRetries(spec, async (signal, timeout) => {
      const { response, release, controller, userAborted } = await this.#send(spec, signal, timeout, true);
      if (response.ok) {
        release(undefined);
        return { response, controller, idleTimeout: timeout, userAborted };
      }
      try {
        const body = await response.text();
        return { response, body, controller, idleTimeout: timeout, userAborted };
      } catch (err) {
        throw release(err);
      } finally {
        release(undefined);
      }
    });
  }

  /**
   * Runs `attempt` until it yields a success, an error that is not to be retried, or the
   * retries are spent. `attempt` returns the response with its body read (for errors).
   */
  async #withRetries<R extends { response: Response; body?: string }>(
    spec: RequestSpec,
    attempt: (signal: AbortSignal | undefined, timeout: number) => Promise<R>,
  ): Promise<R> {
    const maxRetries = spec.options?.maxRetries ?? this.maxRetries;
    const timeout = spec.options?.timeout ?? this.timeout;
    const signal = spec.options?.signal;
    for (let n = 0; ; n++) {
      const mayRetry = spec.retryable && n < maxRetries;
      let result: R;
      try {
        result = await attempt(signal, timeout);
      } catch (err) {
        if (err instanceof APIConnectionError && mayRetry) {
          await sleep(backoffMs(n), signal);
          continue;
        }
        throw err;
      }
      const { response } = result;
      if (response.ok) return result;
      const error = makeAPIError(response.status, response.headers, result.body ?? "");
      if (mayRetry && isRetryableStatus(response.status, error.code)) {
        const retryAfter = parseRetryAfter(response.headers);
        if (retryAfter === undefined) {
          await sleep(backoffMs(n), signal);
          continue;
        }
        if (retryAfter <= RETRY_AFTER_MAX_S) {
          await sleep(retryAfter * 1000, signal);
          continue;
        }
      }
      throw error;
    }
  }

  /**
   * One attempt: the fetch under its own timeout. `release(err)` stops the timer and turns a
   * failure while reading the body into the right error.
   */
  async #send(
    spec: RequestSpec,
    signal: AbortSignal | undefined,
    timeout: number,
    streaming = false,
  ): Promise<{
    response: Response;
    release: (err: unknown) => TaskgateError;
    controller: AbortController;
    userAborted: () => boolean;
  }> {
    if (signal?.aborted) throw new APIUserAbortError();
    const controller = new AbortController();
    let timedOut = false;
    let userAborted = false;
    const onUserAbort = () => {
      userAborted = true;
      controller.abort();
    };
    signal?.addEventListener("abort", onUserAbort, { once: true });
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeout);
    let released = false;
    const release = (err: unknown): TaskgateError => {
      if (!released) {
        released = true;
        clearTimeout(timer);
        // A stream keeps listening to the caller's signal while it is read.
        if (!streaming) signal?.removeEventListener("abort", onUserAbort);
      }
      return toConnectionError(err, timedOut, userAborted);
    };

    const headers: Record<string, string> = {
      Accept: streaming ? "text/event-stream" : "application/json",
      Authorization: `Bearer ${this.apiKey}`,
      "User-Agent": this.userAgent,
      ...this.#headers,
    };
    const init: RequestInit = { method: spec.method, headers, signal: controller.signal };
    if (spec.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(spec.body);
    }
    if (spec.idempotencyKey !== undefined) headers["Idempotency-Key"] = spec.idempotencyKey;
    Object.assign(headers, spec.options?.headers);

    let response: Response;
    try {
      response = await this.#fetch(this.url(spec.path, spec.query), init);
    } catch (err) {
      throw release(err);
    }
    this.lastRequestId = response.headers.get("x-request-id") ?? undefined;
    this.lastRateLimit = readRateLimit(response.headers);
    return { response, release, controller, userAborted: () => userAborted };
  }
}

/** The error for a fetch or body read that failed. */
export function toConnectionError(err: unknown, timedOut: boolean, userAborted: boolean): TaskgateError {
  if (err instanceof TaskgateError) return err;
  if (userAborted) return new APIUserAbortError(undefined, { cause: err });
  if (timedOut) return new APITimeoutError(undefined, { cause: err });
  const detail = err instanceof Error ? describeCause(err) : String(err);
  return new APIConnectionError(`Connection error: ${detail}`, { cause: err });
}

function describeCause(err: Error): string {
  // undici says "fetch failed" and keeps the useful part (ECONNREFUSED ...) in `cause`.
  const cause = (err as { cause?: unknown }).cause;
  if (cause instanceof Error && cause.message) return `${err.message} (${cause.message})`;
  return err.message;
}

