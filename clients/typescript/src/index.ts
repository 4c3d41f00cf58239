// The public surface of the `taskgate` package.

import { Taskgate } from "./client.js";

export default Taskgate;
export { Taskgate, DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS } from "./client.js";
export type { CallParams, ClientOptions } from "./client.js";
export type { RateLimitInfo, RequestOptions } from "./core.js";
export {
  APIConnectionError,
  APIError,
  APIStatusError,
  APITimeoutError,
  APIUserAbortError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  InternalServerError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
  TaskgateError,
  UnprocessableEntityError,
  WaitTimeoutError,
} from "./errors.js";
export type { ErrorDetail } from "./errors.js";
export { AutoPager } from "./pagination.js";
export type { Page } from "./pagination.js";
export { Apis } from "./resources/apis.js";
export type { ApiListParams } from "./resources/apis.js";
export { Tasks, TaskStream } from "./resources/tasks.js";
export type { TaskListParams, WaitOptions } from "./resources/tasks.js";
export { WebhookDeliveries, WebhookEndpoints } from "./resources/webhooks.js";
export type {
  DeletedWebhookEndpoint,
  WebhookDeliveryListParams,
  WebhookEndpointCreateParams,
  WebhookEndpointListParams,
  WebhookEndpointUpdateParams,
} from "./resources/webhooks.js";
export { TERMINAL_STATUSES } from "./types.js";
export type {
  Api,
  ApiDetail,
  ApiInput,
  KnownApi,
  ApiExample,
  ApiLimits,
  ApiList,
  ChatContentPart,
  ChatInput,
  ChatMessage,
  ChatOutput,
  ChatReasoning,
  ChatResponseFormat,
  ChatTool,
  ChatToolCall,
  ChatToolChoice,
  ErrorEnvelope,
  Metadata,
  Pricing,
  Sandbox,
  StreamEvent,
  StreamToolCall,
  StreamReasoning,
  ChatReasoningDetail,
  Task,
  TaskAttempt,
  TaskDetail,
  TaskError,
  TaskEvent,
  TaskList,
  TaskStatus,
  Usage,
  CallWebhook,
  WebhookDelivery,
  WebhookDeliveryAttempt,
  WebhookDeliveryStatus,
  WebhookEndpoint,
  WebhookEventName,
} from "./types.js";
export type { components, operations, paths } from "./generated/schema.js";
export { VERSION } from "./version.js";
export { DEFAULT_WEBHOOK_TOLERANCE, WebhookVerificationError, verifyWebhook } from "./webhooks.js";
export type {
  VerifyWebhookOptions,
  WebhookEvent,
  WebhookEventType,
  WebhookHeaders,
  WebhookTask,
  WebhookTaskEvent,
  WebhookTaskEventType,
  WebhookTestEvent,
} from "./webhooks.js";
