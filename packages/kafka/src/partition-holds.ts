import type { Logger, OnceError } from '@once/core';
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
  logger: Logger;
  events: TypedEmitter<KafkaConsumerEventMap>;
}

/**
 * The partitions a Kafka consumer holds back from kafkajs: those waiting out a retry delay
 * (paused, sought back, resumed by a timer) and those stopped for good (their offset fence does
 * not match the log); the hold of every topic while the database is unusable, and the resume
 * after it, which leaves both kinds paused.
 */
export class PartitionHolds {
  readonly #d: PartitionHoldsDeps;
  readonly #timers = new Map<string, NodeJS.Timeout>();
  readonly #stopped = new Map<string, OnceError>();

  constructor(deps: PartitionHoldsDeps) {
    this.#d = deps;
  }

  /** Partitions paused for a retry backoff, as `topic/partition`. */
  get retrying(): string[] {
    return [...this.#timers.keys()];
  }

  /** Partitions stopped for good, as `topic/partition`. */
  get stopped(): string[] {
    return [...this.#stopped.keys()];
  }

  /**
   * Stops a partition whose fence does not match its log: paused for the rest of this consumer's
   * life, its retry timer cleared, reported once (error log, `error` event, `health()`).
   */
  stop(topic: string, partition: number, error: OnceError): void {
    const key = `${topic}/${partition}`;
    clearTimeout(this.#timers.get(key));
    this.#timers.delete(key);
    try {
      this.#d.consumer()?.pause([{ topic, partitions: [partition] }]);
    } catch {
      // Between kafkajs runs: the next batch of the partition finds it stopped and pauses it again.
    }
    if (this.#stopped.has(key)) return;
    this.#stopped.set(key, error);
    this.#d.logger.error(
      {
        code: error.code,
        topic,
        partition,
      },
      `once/kafka: partition stopped: ${error.message}`,
    );
    this.#d.events.emit('error', { where: 'fence-check', error: serializeError(error), topic, partition });
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

  /** Fetch again, except partitions waiting out a retry delay and those stopped for good. */
  resumeAll(): void {
    const consumer = this.#d.consumer();
    if (!consumer) return;
    consumer.resume(this.#d.topics.map((topic) => ({ topic })));
    for (const key of [...this.#timers.keys(), ...this.#stopped.keys()]) {
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
