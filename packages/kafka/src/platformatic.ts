/**
 * `@once/kafka/platformatic`: the `@platformatic/kafka` client of `@once/kafka` (classic and
 * KIP-848 consumer groups). Import it only where `@platformatic/kafka` (2.12.1 or later 2.x) is
 * installed: an optional peer. That library needs Node 22.22+ or 24.6+; `@once/kafka` itself runs
 * on Node 22.12+.
 *
 * ```ts
 * import { platformatic } from '@once/kafka/platformatic';
 * createKafkaConsumer({
 *   kafka: platformatic({ clientId: 'orders', bootstrapBrokers: ['127.0.0.1:9092'] },
 *     { consumer: { groupProtocol: 'consumer' } }),
 *   ...
 * });
 * ```
 */
import { ErrorCode, OnceError } from '@once/core';
import {
  type PlatformaticDefaults,
  type PlatformaticOptions,
  platformaticClient,
} from './client/platformatic.js';
import type { KafkaClient } from './client/types.js';

export type { PlatformaticDefaults, PlatformaticOptions } from './client/platformatic.js';

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * `@platformatic/kafka` as the client of a once consumer or publisher. `options`: the connection
 * options every consumer, producer and admin client it makes shares (`{ clientId,
 * bootstrapBrokers, ... }`). `defaults.consumer`: consumer options under once's own and under a
 * consumer's `consumerConfig` (e.g. `{ groupProtocol: 'consumer' }` for KIP-848);
 * `defaults.producer`: producer options under a publisher's `producerConfig`.
 *
 * Offsets are committed without metadata (the library sends none), so once's replay marker is not
 * kept in Kafka with this client: the first batch of every newly assigned partition runs one
 * message at a time with its start counted in PostgreSQL.
 */
export function platformatic(options: PlatformaticOptions, defaults?: PlatformaticDefaults): KafkaClient {
  const o = options as Partial<PlatformaticOptions> | null | undefined;
  if (!isRecord(o)) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      "platformatic(options): options must be @platformatic/kafka's connection options ({ clientId, bootstrapBrokers })",
    );
  }
  if (typeof o.clientId !== 'string' || o.clientId === '') {
    throw new OnceError(
      ErrorCode.InvalidOption,
      'platformatic(options): options.clientId must be a non-empty string',
    );
  }
  if (!Array.isArray(o.bootstrapBrokers) || o.bootstrapBrokers.length === 0) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      "platformatic(options): options.bootstrapBrokers must be a non-empty array (e.g. ['127.0.0.1:9092'])",
    );
  }
  if (defaults !== undefined) {
    if (!isRecord(defaults)) {
      throw new OnceError(
        ErrorCode.InvalidOption,
        'platformatic(options, defaults): defaults must be an object ({ consumer?, producer? })',
      );
    }
    for (const key of ['consumer', 'producer'] as const) {
      if (defaults[key] !== undefined && !isRecord(defaults[key])) {
        throw new OnceError(
          ErrorCode.InvalidOption,
          `platformatic(options, defaults): defaults.${key} must be an object of @platformatic/kafka ${key} options`,
        );
      }
    }
  }
  if (defaults?.groupTimeouts !== undefined && typeof defaults.groupTimeouts !== 'boolean') {
    throw new OnceError(
      ErrorCode.InvalidOption,
      'platformatic(options, defaults): defaults.groupTimeouts must be a boolean',
    );
  }
  return platformaticClient(options, defaults);
}
