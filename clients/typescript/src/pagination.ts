// Cursor pages, and the async iterable that follows `next_cursor` to the end.

/** One page of a list. Both spellings of the page fields are there: the wire's and camelCase. */
export interface Page<T> {
  object: "list";
  items: T[];
  has_more: boolean;
  next_cursor: string | null;
  /** The same as `has_more`. */
  hasMore: boolean;
  /** The same as `next_cursor`: pass it as `cursor` to get the next page. */
  nextCursor: string | null;
}

export function toPage<T>(wire: { items: T[]; has_more: boolean; next_cursor?: string | null }): Page<T> {
  const next = wire.next_cursor ?? null;
  return {
    object: "list",
    items: wire.items,
    has_more: wire.has_more,
    next_cursor: next,
    hasMore: wire.has_more,
    nextCursor: next,
  };
}

/**
 * Every item of a list, page after page: `for await (const t of tg.tasks.list({ limit: 10 }))`.
 * Nothing is fetched until the iteration starts; each page is fetched when the previous one is used up.
 */
export class AutoPager<T> implements AsyncIterable<T> {
  readonly #fetchPage: (cursor: string | undefined) => Promise<Page<T>>;
  readonly #firstCursor: string | undefined;

  constructor(fetchPage: (cursor: string | undefined) => Promise<Page<T>>, firstCursor?: string) {
    this.#fetchPage = fetchPage;
    this.#firstCursor = firstCursor;
  }

  /** The pages themselves, one after the other. */
  async *pages(): AsyncGenerator<Page<T>, void, undefined> {
    let cursor = this.#firstCursor;
    for (;;) {
      const page = await this.#fetchPage(cursor);
      yield page;
      if (!page.has_more || !page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) {
      yield* page.items;
    }
  }

  /** Every item in one array (fetches every page: mind long lists). */
  async toArray(): Promise<T[]> {
    const all: T[] = [];
    for await (const item of this) all.push(item);
    return all;
  }
}
