// tg.tasks: read, list, cancel, wait for and stream tasks.

import { type RequestOptions, type Transport, type OpenStream, sleep, toConnectionError } from "../core.js";
import { APIConnectionError, TaskgateError, WaitTimeoutError } from "../errors.js";
import { AutoPager, toPage, type Page } from "../pagination.js";
import { SSEDecoder } from "../sse.js";
import {
  TERMINAL_STATUSES,
  type StreamEvent,
  type StreamReasoning,
  type StreamToolCall,
  type Task,
  type TaskDetail,
  type TaskList,
  type TaskStatus,
} from "../types.js";

/** Filters of `tasks.list` and `tasks.listPage` (the query of `GET /tasks`). */
export interface TaskListParams {
  /** Page size, 1 to 100 (server default 20). The iterator still goes through every page. */
  limit?: number | undefined;
  /** Only the tasks of this API (a slug). */
  api?: string | undefined;
  /** One status, or several (sent comma-separated). */
  status?: TaskStatus | readonly TaskStatus[] | undefined;
  /** Only tasks created strictly after this time (a Date or an RFC 3339 string). */
  createdAfter?: Date | string | undefined;
  /** Only tasks created strictly before this time (a Date or an RFC 3339 string). */
  createdBefore?: Date | string | undefined;
  /** By creation time: `desc` (default, newest first) or `asc`. */
  order?: "asc" | "desc" | undefined;
  /** Start from this `next_cursor` of an earlier page (`null`, as on the last page: from the start). */
  cursor?: string | null | undefined;
}

/** Options of `tasks.wait`. */
export interface WaitOptions extends RequestOptions {
  /** How long to wait for the task to end, in milliseconds (default 600000: 10 minutes). */
  timeoutMs?: number | undefined;
}

const WAIT_DEFAULT_MS = 600_000;
const POLL_START_MS = 250;
const POLL_FACTOR = 1.5;
const POLL_CAP_MS = 2_000;

function time(v: Date | string | undefined): string | undefined {
  return v instanceof Date ? v.toISOString() : v;
}

function taskPath(id: string, suffix = ""): string {
  return `/tasks/${encodeURIComponent(id)}${suffix}`;
}

export function isTerminal(status: TaskStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

export class Tasks {
  readonly #t: Transport;

  constructor(transport: Transport) {
    this.#t = transport;
  }

  /** The task with its input, events and attempts (`GET /tasks/{id}`). */
  get(id: string, options?: RequestOptions): Promise<TaskDetail> {
    return this.#t.json<TaskDetail>({ method: "GET", path: taskPath(id), retryable: true, options });
  }

  /** The task object (`GET /call/{id}`), without the history `get` adds. */
  status(id: string, options?: RequestOptions): Promise<Task> {
    return this.#t.json<Task>({
      method: "GET",
      path: `/call/${encodeURIComponent(id)}`,
      retryable: true,
      options,
    });
  }

  /**
   * Cancels a queued or running task and returns it (`cancelled`). Cancelling a cancelled task
   * returns it unchanged; a succeeded or failed one throws ConflictError (`task_not_cancellable`).
   */
  cancel(id: string, options?: RequestOptions): Promise<Task> {
    // Idempotent by the contract, so safe to retry.
    return this.#t.json<Task>({ method: "POST", path: taskPath(id, "/cancel"), retryable: true, options });
  }

  /**
   * Polls the task until it ends (succeeded, failed or cancelled) and returns it. Throws
   * WaitTimeoutError when it has not ended within `timeoutMs` (a number alone is `timeoutMs`).
   */
  async wait(id: string, options: WaitOptions | number = {}): Promise<Task> {
    const { timeoutMs = WAIT_DEFAULT_MS, ...requestOptions } =
      typeof options === "number" ? { timeoutMs: options } : options;
    const deadline = Date.now() + timeoutMs;
    let delay = POLL_START_MS;
    for (;;) {
      const task = await this.status(id, requestOptions);
      if (isTerminal(task.status)) return task;
      const left = deadline - Date.now();
      if (left <= 0) throw new WaitTimeoutError(id, timeoutMs, task);
      await sleep(Math.min(delay, left), requestOptions.signal);
      delay = Math.min(delay * POLL_FACTOR, POLL_CAP_MS);
    }
  }

  /** One page of tasks, newest first unless `order: "asc"`. */
  async listPage(params: TaskListParams = {}, options?: RequestOptions): Promise<Page<Task>> {
    const status = typeof params.status === "string" ? params.status : params.status?.join(",");
    const wire = await this.#t.json<TaskList>({
      method: "GET",
      path: "/tasks",
      query: {
        limit: params.limit,
        api: params.api,
        status,
        created_after: time(params.createdAfter),
        created_before: time(params.createdBefore),
        order: params.order,
        cursor: params.cursor,
      },
      retryable: true,
      options,
    });
    return toPage(wire);
  }

  /** Every task matching the filters, fetching page after page (`limit` is the page size). */
  list(params: TaskListParams = {}, options?: RequestOptions): AutoPager<Task> {
    const { cursor, ...filters } = params;
    return new AutoPager((next) => this.listPage({ ...filters, cursor: next }, options), cursor ?? undefined);
  }

  /**
   * Follows the task's output as Server-Sent Events, in the order the model generates it:
   * `{ type: "delta", text }` for each piece of text, `{ type: "reasoning", text, signature?,
   * redacted? }` for each piece of reasoning (or, with `text` empty, a signature or an encrypted
   * block), `{ type: "tool_call", index, id?, name?, arguments_delta }` for each fragment of a
   * tool call, then `{ type: "done", task }` with the final task. Tasks that are not chat send
   * only `done`, when they end.
   */
  stream(id: string, options?: RequestOptions): TaskStream {
    return new TaskStream(() =>
      this.#t.stream({ method: "GET", path: taskPath(id, "/stream"), retryable: true, options }),
    );
  }
}

/** A task's event stream: iterate it with `for await`, or `collect()` the whole text and task. */
export class TaskStream implements AsyncIterable<StreamEvent> {
  readonly #open: () => Promise<OpenStream>;

  constructor(open: () => Promise<OpenStream>) {
    this.#open = open;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<StreamEvent, void, undefined> {
    const { response, controller, idleTimeout, userAborted } = await this.#open();
    if (!response.body) throw new APIConnectionError("The stream answer has no body.");
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const sse = new SSEDecoder();
    try {
      for (;;) {
        let timedOut = false;
        const timer = setTimeout(() => {
          timedOut = true;
          controller.abort();
        }, idleTimeout);
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (err) {
          throw toConnectionError(err, timedOut, userAborted());
        } finally {
          clearTimeout(timer);
        }
        const text = chunk.done ? decoder.decode() : decoder.decode(chunk.value, { stream: true });
        for (const event of sse.push(text)) {
          if (event.event === "delta") {
            const data = parseData(event.data, event.event) as { text?: unknown };
            yield { type: "delta", text: typeof data.text === "string" ? data.text : "" };
          } else if (event.event === "reasoning") {
            yield { type: "reasoning", ...toReasoning(parseData(event.data, event.event)) };
          } else if (event.event === "tool_call") {
            yield { type: "tool_call", ...toToolCall(parseData(event.data, event.event)) };
          } else if (event.event === "done") {
            yield { type: "done", task: parseData(event.data, event.event) as Task };
            return;
          }
          // Other events are not part of the contract: skipped, so that new ones break nothing.
        }
        if (chunk.done) break;
      }
      throw new APIConnectionError("The stream ended before its `done` event.");
    } finally {
      // Closes the connection when the reader stops early (break, error) or after `done`.
      controller.abort();
      reader.releaseLock();
    }
  }

  /**
   * Reads the whole stream: the chat text and the final task. The text is the deltas joined;
   * a task that had already finished sends no delta, so its `output.text` is used instead.
   * Reasoning and tool calls are in the task's `output` (`reasoning`, `tool_calls`).
   */
  async collect(): Promise<{ text: string; task: Task }> {
    let text = "";
    let deltas = 0;
    for await (const event of this) {
      if (event.type === "delta") {
        text += event.text;
        deltas++;
      } else if (event.type === "done") {
        const stored = event.task.output?.["text"];
        return { text: deltas === 0 && typeof stored === "string" ? stored : text, task: event.task };
      }
    }
    throw new APIConnectionError("The stream ended before its `done` event.");
  }
}

function toReasoning(data: unknown): StreamReasoning {
  const { text, signature, redacted } = (data ?? {}) as Record<string, unknown>;
  const out: StreamReasoning = { text: typeof text === "string" ? text : "" };
  if (typeof signature === "string") out.signature = signature;
  if (typeof redacted === "string") out.redacted = redacted;
  return out;
}

function toToolCall(data: unknown): StreamToolCall {
  const { index, id, name, arguments_delta } = (data ?? {}) as Record<string, unknown>;
  if (typeof index !== "number" || !Number.isInteger(index) || index < 0) {
    throw new TaskgateError("The stream's `tool_call` event has no valid `index`.");
  }
  const out: StreamToolCall = {
    index,
    arguments_delta: typeof arguments_delta === "string" ? arguments_delta : "",
  };
  if (typeof id === "string") out.id = id;
  if (typeof name === "string") out.name = name;
  return out;
}

function parseData(data: string, event: string): unknown {
  try {
    return JSON.parse(data);
  } catch (err) {
    throw new TaskgateError(`The stream's \`${event}\` event did not carry JSON.`, { cause: err });
  }
}
