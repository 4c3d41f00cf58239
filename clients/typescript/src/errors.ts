// One class per failure, all under `TaskgateError`, so that callers can catch
// exactly what they handle (`instanceof RateLimitError`) or everything at once.

import type { Task } from "./types.js";

/**
 * The base of every error this library throws. The fields of an error answer are typed here
 * too, so that one `catch (err) { if (err instanceof TaskgateError) ... err.status, err.code }`
 * reads them; they are `undefined` (`param`: `null` or `undefined`) for failures without an
 * answer (a connection error, an abort, a wait that ran out, a missing API key).
 */
export class TaskgateError extends Error {
  /** The HTTP status of an error answer (`APIError`); otherwise `undefined`. */
  declare readonly status: number | undefined;
  /** `error.code` of an error answer, e.g. `task_not_found`. */
  declare readonly code: string | undefined;
  /** `error.type` of an error answer, e.g. `not_found_error`. */
  declare readonly type: string | undefined;
  /** `error.param` of an error answer: the offending field or parameter, or `null`. */
  declare readonly param: string | null | undefined;
  /** `meta.request_id` of an error answer (or its `X-Request-Id` header). */
  declare readonly requestId: string | undefined;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }

  /** The same as `requestId`, under the wire's name. */
  get request_id(): string | undefined {
    return this.requestId;
  }
}

/** One entry of an error's `details` (e.g. one schema violation, or a rate-limit window). */
export type ErrorDetail = Record<string, unknown>;

/** What the server said about a failed request, as read from its envelope and headers. */
export interface APIErrorInit {
  status: number;
  type?: string | undefined;
  code?: string | undefined;
  message: string;
  param?: string | null | undefined;
  details?: ErrorDetail[] | undefined;
  requestId?: string | undefined;
  headers?: Headers | undefined;
  body?: unknown;
}

/**
 * An error answer from the server (any HTTP status >= 400). Statuses without a class of
 * their own (405, 408, 413, ...) are thrown as this class itself.
 */
export class APIError extends TaskgateError {
  /** The HTTP status. */
  override readonly status: number;
  /** `error.type`: `invalid_request_error`, `authentication_error`, ... */
  override readonly type: string | undefined;
  /** `error.code`: `invalid_input`, `task_not_found`, ... */
  override readonly code: string | undefined;
  /** `error.param`: the offending field or parameter, when the server names one. */
  override readonly param: string | null;
  /** `error.details`, when present. */
  readonly details: ErrorDetail[] | undefined;
  /** `meta.request_id` (or the `X-Request-Id` header): quote it when asking for help. */
  override readonly requestId: string | undefined;
  /** The answer's headers. */
  readonly headers: Headers | undefined;
  /** The parsed answer body (the envelope), or its text when it was not JSON. */
  readonly body: unknown;

  constructor(init: APIErrorInit) {
    super(init.message);
    this.status = init.status;
    this.type = init.type;
    this.code = init.code;
    this.param = init.param ?? null;
    this.details = init.details;
    this.requestId = init.requestId;
    this.headers = init.headers;
    this.body = init.body;
  }
}

/** 400: the request is invalid (`invalid_json`, `invalid_field`, `invalid_input`, `invalid_parameter`). */
export class BadRequestError extends APIError {}
/** 401: missing, malformed, unknown, revoked or expired API key. */
export class AuthenticationError extends APIError {}
/** 403: the key lacks a scope or the API, the account is suspended, or its spend limit is reached. */
export class PermissionDeniedError extends APIError {}
/** 404: unknown task, API or route. */
export class NotFoundError extends APIError {}
/** 409: `task_not_cancellable`, or `idempotency_in_progress`. */
export class ConflictError extends APIError {}
/** 422: `idempotency_key_reused`: the same Idempotency-Key with a different body. */
export class UnprocessableEntityError extends APIError {}

/** 429: a rate limit was reached. */
export class RateLimitError extends APIError {
  /** Seconds to wait before trying again (the `Retry-After` header), when sent. */
  readonly retryAfter: number | undefined;

  constructor(init: APIErrorInit & { retryAfter?: number | undefined }) {
    super(init);
    this.retryAfter = init.retryAfter;
  }

  /** The same as `retryAfter`, under the wire's name. */
  get retry_after(): number | undefined {
    return this.retryAfter;
  }
}

/** 5xx: the server failed (`internal_error`, `service_unavailable`, `storage_unavailable`, ...). */
export class InternalServerError extends APIError {}

/** The same class as `APIError`, under the name other SDKs use for it. */
export { APIError as APIStatusError };

/** The server could not be reached, or the connection failed before an answer was read. */
export class APIConnectionError extends TaskgateError {
  override readonly status: undefined = undefined;
  override readonly code: undefined = undefined;
  override readonly type: undefined = undefined;
  override readonly param: null = null;
  override readonly requestId: undefined = undefined;

  constructor(message = "Connection error.", options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A request took longer than the client's `timeout`. */
export class APITimeoutError extends APIConnectionError {
  constructor(message = "Request timed out.", options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The caller's own `AbortSignal` stopped the request. */
export class APIUserAbortError extends TaskgateError {
  constructor(message = "Request was aborted.", options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** `tasks.wait` gave up: the task had not ended within `timeoutMs`. */
export class WaitTimeoutError extends TaskgateError {
  /** The task waited for. */
  readonly taskId: string;
  /** The task as last seen (still queued or running). */
  readonly task: Task | undefined;

  constructor(taskId: string, timeoutMs: number, task: Task | undefined) {
    const status = task ? ` (still ${task.status})` : "";
    super(`Task ${taskId} did not end within ${timeoutMs} ms${status}.`);
    this.taskId = taskId;
    this.task = task;
  }
}

/** The class for an error answer of this status. */
export function errorClassFor(status: number): typeof APIError {
  switch (status) {
    case 400:
      return BadRequestError;
    case 401:
      return AuthenticationError;
    case 403:
      return PermissionDeniedError;
    case 404:
      return NotFoundError;
    case 409:
      return ConflictError;
    case 422:
      return UnprocessableEntityError;
    case 429:
      return RateLimitError;
    default:
      return status >= 500 ? InternalServerError : APIError;
  }
}
