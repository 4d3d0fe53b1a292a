/**
 * Runs `work` over `items` with at most `limit` in flight. Every item runs; then the first error,
 * if any, is thrown. Results keep the order of `items`.
 */
export async function eachLimited<T, R>(items: T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  const errors: unknown[] = [];
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const index = next++;
      try {
        results[index] = await work(items[index]);
      } catch (error) {
        errors.push(error);
      }
    }
  });
  await Promise.all(lanes);
  if (errors.length > 0) throw errors[0];
  return results;
}
