import { serializeError, type TypedEmitter } from '@once/core/adapter';
import type { KafkaConsumerEventMap } from './events.js';
import type { ConsumerLike } from './kafka-like.js';

/** What {@link PartitionHolds} needs from its consumer. */
export interface PartitionHoldsDeps {
  /** The kafkajs consumer, once connected. */
  consumer: () => ConsumerLike | undefined;
  topics: readonly string[];
  /** False while the consumer holds everything for the database. */
  fetching: () => boolean;
  events: TypedEmitter<KafkaConsumerEventMap>;
}

/**
 * The partitions a Kafka consumer holds back from kafkajs: those waiting out a retry delay
 * (paused, sought back, resumed by a timer); the hold of every topic while the database is
 * unusable, and the resume after it, which leaves those paused.
 */
export class PartitionHolds {
  readonly #d: PartitionHoldsDeps;
  readonly #timers = new Map<string, NodeJS.Timeout>();

  constructor(deps: PartitionHoldsDeps) {
    this.#d = deps;
  }

  /** Partitions paused for a retry backoff, as `topic/partition`. */
  get retrying(): string[] {
    return [...this.#timers.keys()];
  }

  /**
   * Pauses a partition and seeks back to `offset`; resumes it after `delayMs`, unless the
   * consumer is then holding everything for the database (the resume after that takes it along).
   * Without a delay it waits for that resume.
   */
  retryLater(topic: string, partition: number, offset: string, delayMs?: number): void {
    const consumer = this.#d.consumer();
    if (!consumer) return;
    const key = `${topic}/${partition}`;
    const tp = [{ topic, partitions: [partition] }];
    try {
      consumer.pause(tp);
      consumer.seek({ topic, partition, offset });
    } catch (err) {
      // kafkajs throws when it is between runs (a crash restart): it reads from the committed offset then.
      this.#d.events.emit('error', { where: 'seek', error: serializeError(err), topic, partition });
    }
    clearTimeout(this.#timers.get(key));
    this.#timers.delete(key);
    if (delayMs === undefined) return;
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      if (!this.#d.fetching()) return;
      try {
        consumer.resume(tp);
      } catch (err) {
        this.#d.events.emit('error', { where: 'resume', error: serializeError(err), topic, partition });
      }
    }, delayMs);
    timer.unref?.();
    this.#timers.set(key, timer);
  }

  /** The database or schema cannot be used: fetch nothing from any topic. */
  pauseAll(): void {
    this.#d.consumer()?.pause(this.#d.topics.map((topic) => ({ topic })));
  }

  /** Fetch again, except partitions waiting out a retry delay. */
  resumeAll(): void {
    const consumer = this.#d.consumer();
    if (!consumer) return;
    consumer.resume(this.#d.topics.map((topic) => ({ topic })));
    for (const key of this.#timers.keys()) {
      const cut = key.lastIndexOf('/');
      consumer.pause([{ topic: key.slice(0, cut), partitions: [Number(key.slice(cut + 1))] }]);
    }
  }

  /** The consumer is closing: no retry timer may fire after it. */
  clearTimers(): void {
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
  }
}
