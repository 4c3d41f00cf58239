// tg.apis: the catalog of APIs the key may call.

import type { RequestOptions, Transport } from "../core.js";
import { AutoPager, toPage, type Page } from "../pagination.js";
import type { Api, ApiDetail, ApiList } from "../types.js";

/** Filters of `apis.list` and `apis.listPage` (the query of `GET /apis`). */
export interface ApiListParams {
  /** Page size, 1 to 100 (server default 20). The iterator still goes through every page. */
  limit?: number | undefined;
  /** Only APIs of this kind: `chat`, `embedding`, `classification`, `tokenization`, ... */
  kind?: string | undefined;
  /** Only APIs served by this provider, e.g. `builtin`. */
  provider?: string | undefined;
  /** Text search in slug, name and description. */
  q?: string | undefined;
  /** Start from this `next_cursor` of an earlier page (`null`, as on the last page: from the start). */
  cursor?: string | null | undefined;
}

export class Apis {
  readonly #t: Transport;

  constructor(transport: Transport) {
    this.#t = transport;
  }

  /** One API with its schemas, examples and limits (`GET /apis/{slug}`). */
  get(slug: string, options?: RequestOptions): Promise<ApiDetail> {
    return this.#t.json<ApiDetail>({
      method: "GET",
      path: `/apis/${encodeURIComponent(slug)}`,
      retryable: true,
      options,
    });
  }

  /** One page of the catalog. */
  async listPage(params: ApiListParams = {}, options?: RequestOptions): Promise<Page<Api>> {
    const wire = await this.#t.json<ApiList>({
      method: "GET",
      path: "/apis",
      query: {
        limit: params.limit,
        kind: params.kind,
        provider: params.provider,
        q: params.q,
        cursor: params.cursor,
      },
      retryable: true,
      options,
    });
    return toPage(wire);
  }

  /** Every API matching the filters, fetching page after page (`limit` is the page size). */
  list(params: ApiListParams = {}, options?: RequestOptions): AutoPager<Api> {
    const { cursor, ...filters } = params;
    return new AutoPager((next) => this.listPage({ ...filters, cursor: next }, options), cursor ?? undefined);
  }
}
