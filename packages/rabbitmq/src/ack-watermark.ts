/** How one delivery is settled with the broker. */
export type AckKind = 'ack' | 'requeue' | 'reject';

/** The two channel methods the watermark needs; an amqplib `Channel` fits. */
export interface AckTarget {
  ack(message: { fields: { deliveryTag: number } }, allUpTo?: boolean): void;
  nack(message: { fields: { deliveryTag: number } }, allUpTo?: boolean, requeue?: boolean): void;
}

/**
 * One in-order ack watermark per channel (docs/pitfalls.md R1). Deliveries are tracked in the order the
 * channel delivered them; settling marks one, and {@link AckWatermark.flush} sends only the
 * contiguous settled prefix, so an ack with `multiple` never covers a tag that is still being
 * processed. A run of acks goes out as one `multiple` ack. Once the channel is gone the watermark
 * is dead: its tags mean nothing on any other channel, so nothing is ever sent again (a 406
 * "unknown delivery tag" would close the new channel).
 */
export class AckWatermark {
  readonly #target: AckTarget;
  /** Delivery tags in delivery order, from `#head` on. */
  readonly #tags: number[] = [];
  /** How each tag of `#tags` is settled, at the same index; undefined while it is not. */
  readonly #kinds: (AckKind | undefined)[] = [];
  #head = 0;
  #last = 0;
  #dead = false;
  #onError: (err: unknown) => void;

  /** @param onError called when the channel refuses a send (it is closing); the watermark dies. */
  constructor(target: AckTarget, onError: (err: unknown) => void = () => {}) {
    this.#target = target;
    this.#onError = onError;
  }

  /** Registers a delivery. Tags rise strictly on one channel; anything else is a bug upstream. */
  track(tag: number): void {
    if (this.#dead) return;
    if (!(tag > this.#last))
      throw new RangeError(`delivery tag ${tag} is not above the last one (${this.#last})`);
    this.#last = tag;
    this.#tags.push(tag);
    this.#kinds.push(undefined);
  }

  /** Records how a tracked delivery is settled. Returns false for a dead channel or an unknown tag. */
  settle(tag: number, kind: AckKind): boolean {
    if (this.#dead) return false;
    const i = this.#indexOf(tag);
    if (i < 0 || this.#kinds[i] !== undefined) return false;
    this.#kinds[i] = kind;
    return true;
  }

  /** Sends the settled prefix, in order. Returns the number of deliveries settled with the broker. */
  flush(): number {
    if (this.#dead) return 0;
    let sent = 0;
    let ackRunEnd = 0;
    try {
      while (this.#head < this.#tags.length) {
        const tag = this.#tags[this.#head]!;
        const kind = this.#kinds[this.#head];
        if (kind === undefined) break;
        if (kind === 'ack') {
          ackRunEnd = tag;
        } else {
          // Close the run of acks before it, then settle this one alone.
          if (ackRunEnd) this.#target.ack(msg(ackRunEnd), true);
          ackRunEnd = 0;
          this.#target.nack(msg(tag), false, kind === 'requeue');
        }
        this.#head++;
        sent++;
      }
      if (ackRunEnd) this.#target.ack(msg(ackRunEnd), true);
    } catch (err) {
      this.kill();
      this.#onError(err);
      return sent;
    }
    if (this.#head > 1024 && this.#head * 2 > this.#tags.length) {
      this.#tags.splice(0, this.#head);
      this.#kinds.splice(0, this.#head);
      this.#head = 0;
    }
    return sent;
  }

  /** The channel is gone: forget every tag, send nothing ever again. */
  kill(): void {
    this.#dead = true;
    this.#tags.length = 0;
    this.#kinds.length = 0;
    this.#head = 0;
  }

  get dead(): boolean {
    return this.#dead;
  }

  /** Deliveries tracked and not yet sent to the broker. */
  get outstanding(): number {
    return this.#tags.length - this.#head;
  }

  /** The index of a tag not yet sent, or -1. */
  #indexOf(tag: number): number {
    // Tags are ascending from #head: binary search.
    let lo = this.#head;
    let hi = this.#tags.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const t = this.#tags[mid]!;
      if (t === tag) return mid;
      if (t < tag) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }
}

function msg(deliveryTag: number): { fields: { deliveryTag: number } } {
  return { fields: { deliveryTag } };
}
