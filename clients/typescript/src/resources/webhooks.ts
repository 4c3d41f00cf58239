// tg.webhookEndpoints and tg.webhookDeliveries: where the tasks' events go, their
// signing secrets, and the delivery log. Verifying a delivery is `verifyWebhook`.

import type { RequestOptions, Transport } from "../core.js";
import { AutoPager, toPage, type Page } from "../pagination.js";
import type {
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookDeliveryStatus,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEventName,
} from "../types.js";

/** The body of `webhookEndpoints.create`. */
export interface WebhookEndpointCreateParams {
  /** `http` or `https`; private and loopback addresses are refused unless the server allows them. */
  url: string;
  /** Default: `task.succeeded`, `task.failed`, `task.cancelled`. */
  events?: WebhookEventName[] | undefined;
  description?: string | null | undefined;
}

/** The body of `webhookEndpoints.update`: only what is given changes (`description: null` removes it). */
export interface WebhookEndpointUpdateParams {
  url?: string | undefined;
  events?: WebhookEventName[] | undefined;
  description?: string | null | undefined;
  /** `true` re-enables an endpoint disabled for any reason. */
  enabled?: boolean | undefined;
}

/** What `webhookEndpoints.delete` answers. */
export interface DeletedWebhookEndpoint {
  id: string;
  object: "webhook_endpoint";
  deleted: true;
}

/** `list` and `listPage` of endpoints. */
export interface WebhookEndpointListParams {
  limit?: number | undefined;
  cursor?: string | null | undefined;
}

/** Filters of the delivery log. */
export interface WebhookDeliveryListParams {
  limit?: number | undefined;
  endpointId?: string | undefined;
  taskId?: string | undefined;
  status?: WebhookDeliveryStatus | undefined;
  cursor?: string | null | undefined;
}

function without<T extends object>(value: T): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined));
}

export class WebhookEndpoints {
  readonly #t: Transport;

  constructor(transport: Transport) {
    this.#t = transport;
  }

  #path(id: string, more = ""): string {
    return `/webhook_endpoints/${encodeURIComponent(id)}${more}`;
  }

  /** Makes an endpoint; its `secret` (`whsec_…`) is in this answer only (later: `secret(id)`). */
  create(params: WebhookEndpointCreateParams, options?: RequestOptions): Promise<WebhookEndpoint> {
    return this.#t.json<WebhookEndpoint>({
      method: "POST",
      path: "/webhook_endpoints",
      body: without(params),
      retryable: false,
      options,
    });
  }

  get(id: string, options?: RequestOptions): Promise<WebhookEndpoint> {
    return this.#t.json<WebhookEndpoint>({ method: "GET", path: this.#path(id), retryable: true, options });
  }

  update(id: string, params: WebhookEndpointUpdateParams, options?: RequestOptions): Promise<WebhookEndpoint> {
    return this.#t.json<WebhookEndpoint>({
      method: "PATCH",
      path: this.#path(id),
      body: without(params),
      retryable: true,
      options,
    });
  }

  delete(id: string, options?: RequestOptions): Promise<DeletedWebhookEndpoint> {
    return this.#t.json<DeletedWebhookEndpoint>({ method: "DELETE", path: this.#path(id), retryable: true, options });
  }

  /** One page of endpoints, oldest first. */
  async listPage(params: WebhookEndpointListParams = {}, options?: RequestOptions): Promise<Page<WebhookEndpoint>> {
    const wire = await this.#t.json<WebhookEndpointList>({
      method: "GET",
      path: "/webhook_endpoints",
      query: { limit: params.limit, cursor: params.cursor },
      retryable: true,
      options,
    });
    return toPage(wire);
  }

  /** Every endpoint, page after page. */
  list(params: WebhookEndpointListParams = {}, options?: RequestOptions): AutoPager<WebhookEndpoint> {
    const { cursor, ...rest } = params;
    return new AutoPager((next) => this.listPage({ ...rest, cursor: next }, options), cursor ?? undefined);
  }

  /** The endpoint's signing secret. */
  async secret(id: string, options?: RequestOptions): Promise<string> {
    const r = await this.#t.json<{ secret: string }>({
      method: "GET",
      path: this.#path(id, "/secret"),
      retryable: true,
      options,
    });
    return r.secret;
  }

  /** A new secret; the old one keeps signing beside it for a while (24 h by default). */
  async rotateSecret(id: string, options?: RequestOptions): Promise<string> {
    const r = await this.#t.json<{ secret: string }>({
      method: "POST",
      path: this.#path(id, "/rotate_secret"),
      retryable: false,
      options,
    });
    return r.secret;
  }

  /** Sends a `webhook.test` event now; its delivery. */
  test(id: string, options?: RequestOptions): Promise<WebhookDelivery> {
    return this.#t.json<WebhookDelivery>({ method: "POST", path: this.#path(id, "/test"), retryable: false, options });
  }

  /** The secret that signs calls' own webhooks (`call({ webhook })`) of the key's mode. */
  async signingSecret(options?: RequestOptions): Promise<string> {
    const r = await this.#t.json<{ secret: string }>({
      method: "GET",
      path: "/webhooks/secret",
      retryable: true,
      options,
    });
    return r.secret;
  }

  /** Rotates the calls' signing secret (the old one overlaps). */
  async rotateSigningSecret(options?: RequestOptions): Promise<string> {
    const r = await this.#t.json<{ secret: string }>({
      method: "POST",
      path: "/webhooks/secret/rotate",
      retryable: false,
      options,
    });
    return r.secret;
  }
}

export class WebhookDeliveries {
  readonly #t: Transport;

  constructor(transport: Transport) {
    this.#t = transport;
  }

  get(id: string, options?: RequestOptions): Promise<WebhookDelivery> {
    return this.#t.json<WebhookDelivery>({
      method: "GET",
      path: `/webhook_deliveries/${encodeURIComponent(id)}`,
      retryable: true,
      options,
    });
  }

  /** Sends it again now: a new attempt with the same `webhook-id`. */
  retry(id: string, options?: RequestOptions): Promise<WebhookDelivery> {
    return this.#t.json<WebhookDelivery>({
      method: "POST",
      path: `/webhook_deliveries/${encodeURIComponent(id)}/retry`,
      retryable: false,
      options,
    });
  }

  /** One page of the delivery log, newest first. */
  async listPage(params: WebhookDeliveryListParams = {}, options?: RequestOptions): Promise<Page<WebhookDelivery>> {
    const wire = await this.#t.json<WebhookDeliveryList>({
      method: "GET",
      path: "/webhook_deliveries",
      query: {
        limit: params.limit,
        endpoint_id: params.endpointId,
        task_id: params.taskId,
        status: params.status,
        cursor: params.cursor,
      },
      retryable: true,
      options,
    });
    return toPage(wire);
  }

  /** Every delivery matching the filters, page after page. */
  list(params: WebhookDeliveryListParams = {}, options?: RequestOptions): AutoPager<WebhookDelivery> {
    const { cursor, ...rest } = params;
    return new AutoPager((next) => this.listPage({ ...rest, cursor: next }, options), cursor ?? undefined);
  }
}
