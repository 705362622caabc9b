import { serializeError, type TypedEmitter } from '@once/core/adapter';
import type { GroupConsumer } from './client/types.js';
import type { KafkaConsumerEventMap } from './events.js';

/** What {@link PartitionHolds} needs from its consumer. */
export interface PartitionHoldsDeps {
  /** The client's consumer, once connected. */
  consumer: () => GroupConsumer | undefined;
  topics: readonly string[];
  /** False while the consumer holds everything for the database. */
  fetching: () => boolean;
  events: TypedEmitter<KafkaConsumerEventMap>;
}

/**
 * The partitions a Kafka consumer holds back from its client: those waiting out a retry delay
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
    try {
      consumer.pause(topic, [partition]);
      consumer.seek(topic, partition, offset);
    } catch (err) {
      // A client may throw between runs (kafkajs' crash restart): it reads from the committed offset then.
      this.#d.events.emit('error', { where: 'seek', error: serializeError(err), topic, partition });
    }
    clearTimeout(this.#timers.get(key));
    this.#timers.delete(key);
    if (delayMs === undefined) return;
    const timer = setTimeout(() => {
      this.#timers.delete(key);
      if (!this.#d.fetching()) return;
      try {
        consumer.resume(topic, [partition]);
      } catch (err) {
        this.#d.events.emit('error', { where: 'resume', error: serializeError(err), topic, partition });
      }
    }, delayMs);
    timer.unref?.();
    this.#timers.set(key, timer);
  }

  /** The database or schema cannot be used: fetch nothing from any topic. */
  pauseAll(): void {
    const consumer = this.#d.consumer();
    for (const topic of this.#d.topics) consumer?.pause(topic);
  }

  /** Fetch again, except partitions waiting out a retry delay. */
  resumeAll(): void {
    const consumer = this.#d.consumer();
    if (!consumer) return;
    for (const topic of this.#d.topics) consumer.resume(topic);
    for (const key of this.#timers.keys()) {
      const cut = key.lastIndexOf('/');
      consumer.pause(key.slice(0, cut), [Number(key.slice(cut + 1))]);
    }
  }

  /** The consumer is closing: no retry timer may fire after it. */
  clearTimers(): void {
    for (const t of this.#timers.values()) clearTimeout(t);
    this.#timers.clear();
  }
}
