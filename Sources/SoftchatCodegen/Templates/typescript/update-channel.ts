/**
 * The updates of one native callback. The addon calls `sink` on the JS thread, in order, with
 * each update's JSON and finally with null. Until the first iterator exists the newest
 * `earlyLimit` updates are kept, so nothing is lost between start and the first `for await`;
 * each iterator then gets every later update. An iterator ends after the final null. The
 * channel keeps its handle alive until then, so a transport read only through its iterators is
 * not collected (and stopped) while it runs.
 */
export class UpdateChannel<T> {
  /** Updates kept before the first iterator exists (the newest ones; the account holds the rest). */
  static readonly earlyLimit = 10_000;
  /** The handle the channel belongs to: kept alive while updates may still come. */
  owner: unknown = null;
  private readonly early: T[] = [];
  private readonly readers = new Set<{ queue: T[]; wake: (() => void) | null }>();
  private attached = false;
  private ended = false;

  constructor(private readonly decode: (value: unknown) => T) {}

  readonly sink = (json: string | null): void => {
    if (json === null) {
      this.ended = true;
      this.owner = null;
      for (const r of this.readers) r.wake?.();
      return;
    }
    const value = this.decode(JSON.parse(json));
    if (!this.attached) {
      if (this.early.length === UpdateChannel.earlyLimit) this.early.shift();
      this.early.push(value);
      return;
    }
    for (const r of this.readers) {
      r.queue.push(value);
      r.wake?.();
    }
  };

  iterate(): AsyncIterable<T> {
    const reader = { queue: this.attached ? [] : this.early.splice(0), wake: null as (() => void) | null };
    this.attached = true;
    this.readers.add(reader);
    const channel = this;
    return {
      [Symbol.asyncIterator](): AsyncIterator<T> {
        return {
          async next(): Promise<IteratorResult<T>> {
            while (reader.queue.length === 0) {
              if (channel.ended) {
                channel.readers.delete(reader);
                return { done: true, value: undefined };
              }
              await new Promise<void>((resolve) => { reader.wake = resolve; });
              reader.wake = null;
            }
            return { done: false, value: reader.queue.shift() as T };
          },
          async return(): Promise<IteratorResult<T>> {
            channel.readers.delete(reader);
            return { done: true, value: undefined };
          },
        };
      },
    };
  }
}
