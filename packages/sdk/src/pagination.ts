import { SdkErrorCode, UmsError } from "./errors.js";

/** One page of a continuation-token list (spec section 8). */
export interface PageOf<T> {
  items: readonly T[];
  hasMore: boolean;
  nextContinuationToken: string | null;
}

/**
 * Yields every item of a paged list, fetching the next page only when the previous one is used
 * up, and continuing while the server says `has_more`. A page with `has_more` but no new token
 * would loop forever, so it is an error.
 */
export async function* paginate<T>(
  fetchPage: (continuationToken: string | undefined) => Promise<PageOf<T>>,
  firstToken?: string,
): AsyncGenerator<T, void, undefined> {
  let token = firstToken;
  const seen = new Set<string>();
  for (;;) {
    const page = await fetchPage(token);
    yield* page.items;
    if (!page.hasMore) return;
    const next = page.nextContinuationToken;
    if (!next || seen.has(next)) {
      throw new UmsError(
        next
          ? "the server returned the same next_continuation_token twice; stopping to avoid a loop"
          : "the server said has_more but sent no next_continuation_token",
        SdkErrorCode.BadContinuation,
      );
    }
    seen.add(next);
    token = next;
  }
}
