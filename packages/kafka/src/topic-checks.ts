import { type Inbox, OnceError } from '@once/core';
import { warnIfRetentionShort } from '@once/core/adapter';
import type { ClientAdmin } from './client/types.js';
import { KafkaErrorCode } from './errors.js';
import type { ResolvedKafkaConsumerOptions } from './options.js';

/**
 * What start() checks of the topics, with the admin client: Kafka answers (`KAFKA_UNREACHABLE`
 * naming the step), every topic exists (`KAFKA_UNKNOWN_TOPIC`), and none keeps messages longer
 * than the inbox keeps ids (a warning).
 */
export async function checkTopics(
  admin: ClientAdmin,
  o: ResolvedKafkaConsumerOptions,
  inbox: Inbox['options'],
): Promise<void> {
  await kafkaStep('connect the admin client', () => admin.connect());
  const existing = new Set(await kafkaStep('list topics', () => admin.listTopics()));
  const missing = o.topics.filter((t) => !existing.has(t));
  if (missing.length > 0) {
    throw new OnceError(
      KafkaErrorCode.UnknownTopic,
      `topic(s) ${missing.join(', ')} do not exist: create them first`,
    );
  }
  await checkRetention(admin, o, inbox);
}

/**
 * Warns when a topic keeps messages longer than the inbox keeps ids: a group whose offsets are
 * reset reads them again.
 * Best effort: a failed read of the topic configs is only logged at debug level; a client library
 * that cannot read them at all (Confluent's) is said at info level.
 */
async function checkRetention(
  admin: ClientAdmin,
  o: ResolvedKafkaConsumerOptions,
  inbox: Inbox['options'],
): Promise<void> {
  const logger = inbox.logger;
  try {
    const res = await admin.retentionMs(o.topics);
    if (res === undefined) {
      logger.info(
        { consumer: inbox.consumer, topics: o.topics, retentionMs: inbox.retentionMs },
        "once kafka: this client library cannot read topic configurations, so the retention check did not run: keep retentionMs longer than the topics' retention.ms",
      );
      return;
    }
    for (const [topic, ms] of res) {
      warnIfRetentionShort(logger, {
        consumer: inbox.consumer,
        retentionMs: inbox.retentionMs,
        horizonMs: ms < 0 ? Number.POSITIVE_INFINITY : ms,
        source: `Kafka topic ${topic} (retention.ms; read again after an offset reset)`,
      });
    }
  } catch (err) {
    logger.debug({ error: (err as Error)?.message }, 'once kafka: could not read topic retention');
  }
}

/** Runs a Kafka call of the start sequence; a failure becomes a `KAFKA_UNREACHABLE` error that says which. */
export async function kafkaStep<T>(what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (OnceError.is(err)) throw err;
    throw new OnceError(KafkaErrorCode.Unreachable, `cannot ${what}: ${(err as Error)?.message ?? err}`, {
      retryable: true,
      cause: err,
    });
  }
}
