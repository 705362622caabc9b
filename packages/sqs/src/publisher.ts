import {
  type MessageAttributeValue,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import {
  ErrorCode,
  type Logger,
  OnceError,
  type OutboxPublisher,
  type OutboxPublishOptions,
  type SerializedError,
} from '@once/core';
import { optionCheck, serializeError, silentLogger, sleep } from '@once/core/adapter';
import { SqsErrorCode } from './errors.js';
import { BODY_ENCODING_ATTRIBUTE, sqsBody, sqsToken } from './sqs-body.js';

/** One message to publish; core's `OutboxMessage` (what the relay hands over) fits. */
export interface PublishMessage {
  /** The outbox id: sent as the `message-id` attribute and as the FIFO MessageDeduplicationId. */
  id: string;
  /** The outbox destination: a queue URL, or a name that `queueUrl`/`queueUrlOf` maps to one. */
  destination: string;
  /** The FIFO MessageGroupId; required for FIFO queues. */
  key?: string | null | undefined;
  /**
   * The message body: sent as text when SQS can carry it, else base64 with the `once-body-encoding` attribute
   * (once's consumer decodes it back to the same bytes).
   */
  body: Buffer | string;
  /** Extra String message attributes (SQS allows ten in all, the id included). */
  headers?: Readonly<Record<string, string>> | undefined;
  /**
   * Set on a republish of a message already sent under `id` (core's `OutboxMessage.republish`):
   * on a FIFO queue it goes with `deduplicationId` as its MessageDeduplicationId, since SQS drops
   * a second send of the original's for five minutes and still answers success. The id stays in
   * the `message-id` attribute. @default not a republish
   */
  republish?:
    | {
        /** The MessageDeduplicationId to send the republish with on a FIFO queue. */
        readonly deduplicationId: string;
      }
    | undefined;
}

/** The fate of one message: mark the outbox row sent only when `ok`. */
export type PublishResult =
  | {
      /** The outbox id of the message. */
      id: string;
      /** SQS took it: the relay marks the row sent. */
      ok: true;
      /** The MessageId SQS gave it; undefined when SQS did not say. */
      sqsMessageId: string | undefined;
    }
  | {
      /** The outbox id of the message. */
      id: string;
      /** SQS did not take it. */
      ok: false;
      /**
       * False when SQS blamed the sender (the relay parks the row at once); true for a fault worth retrying.
       */
      retryable: boolean;
      /** Why SQS refused it or the call failed. */
      error: SerializedError;
    };

/** The keys of {@link SqsPublisherOptions}: `createSqsPublisher` refuses any other. */
const SQS_PUBLISHER_KEYS: Readonly<Record<keyof SqsPublisherOptions, true>> = Object.freeze({
  client: true,
  idHeader: true,
  queueUrl: true,
  queueUrlOf: true,
  maxRetries: true,
  retryDelayMs: true,
  logger: true,
});

/** Options of {@link createSqsPublisher}. */
export interface SqsPublisherOptions {
  /**
   * The AWS SDK v3 SQS client to send with; anything without a `send` method is refused with
   * `INVALID_OPTION`.
   */
  client: SQSClient;
  /** The message attribute carrying the id, read by once's consumers (`idHeader` there too). @default 'message-id' */
  idHeader?: string;
  /** Sends everything to this queue, whatever the destination is called (one publisher per relay destination). */
  queueUrl?: string;
  /** Maps a destination to a queue URL. @default `queueUrl`, else the destination is the URL */
  queueUrlOf?: (destination: string) => string;
  /** Extra rounds for entries that failed on SQS's side (or whose call failed). @default 3 */
  maxRetries?: number;
  /** Delay before the first extra round, doubling after, in ms. @default 100 */
  retryDelayMs?: number;
  /** `(fields, message)`; `false` or none: silent. @default silent */
  logger?: Logger | false;
}

/** Publishes outbox rows to SQS; see {@link createSqsPublisher}. It is core's `OutboxPublisher`: give it to `createRelay`. */
export interface SqsPublisher extends OutboxPublisher {
  /**
   * Sends every message and returns one result per message, in input order. Never throws for a
   * message's sake. An aborted `signal` (the relay's deadline) aborts the request in flight and
   * skips further rounds: messages not confirmed by then are reported failed (retryable).
   */
  publish(messages: readonly PublishMessage[], options?: OutboxPublishOptions): Promise<PublishResult[]>;
}

const BATCH_MAX = 10;
const BATCH_BYTES = 256 * 1024;
const MAX_ATTRIBUTES = 10;
interface Prepared {
  index: number;
  url: string;
  entry: Omit<SendMessageBatchRequestEntry, 'Id'>;
  bytes: number;
}

/**
 * Creates the outbox's SQS publisher: SendMessageBatch per destination in calls of up to ten, the
 * outbox id in the `message-id` attribute and, on FIFO queues, as MessageDeduplicationId with the
 * key as MessageGroupId (a republish: its own deduplication id, see `PublishMessage.republish`). SQS reports per-entry failures inside a successful response; those (and
 * whole failed calls) are retried `maxRetries` times, then reported, so the relay leaves the row
 * pending. A message SQS rejects as malformed (sender fault) is not retried.
 */
export function createSqsPublisher(options: SqsPublisherOptions): SqsPublisher {
  optionCheck.namingFactory('createSqsPublisher', () => optionCheck.knownKeys(options, SQS_PUBLISHER_KEYS));
  if (!options || typeof (options.client as { send?: unknown })?.send !== 'function') {
    throw new OnceError(ErrorCode.InvalidOption, "option 'client' must be an SQSClient");
  }
  // The consumer's check of the same attribute name (SQS allows 256 characters).
  const idHeader = optionCheck.name('idHeader', options.idHeader ?? 'message-id', 256);
  if (options.queueUrlOf !== undefined) optionCheck.function('queueUrlOf', options.queueUrlOf);
  const maxRetries = optionCheck.integer('maxRetries', options.maxRetries ?? 3, 0);
  const retryDelayMs = optionCheck.integer('retryDelayMs', options.retryDelayMs ?? 100, 0);
  const logger = options.logger || silentLogger;
  const { client } = options;
  if (options.queueUrl !== undefined && !/^https?:\/\/\S+$/.test(options.queueUrl)) {
    throw new OnceError(
      ErrorCode.InvalidOption,
      `option 'queueUrl' must be an http(s) queue URL, got ${JSON.stringify(options.queueUrl)}`,
    );
  }
  const fixed = options.queueUrl;
  const urlOf = options.queueUrlOf ?? ((d: string) => fixed ?? d);

  function prepare(m: PublishMessage, index: number): Prepared | PublishResult {
    const fail = (code: string, message: string): PublishResult => ({
      id: m.id,
      ok: false,
      retryable: false,
      error: serializeError(new OnceError(code, message)),
    });
    if (typeof m.id !== 'string' || m.id.length === 0)
      return fail(ErrorCode.InvalidId, 'outbox message has no id');
    const url = urlOf(m.destination);
    const fifo = url.endsWith('.fifo');
    if (fifo && (m.key === undefined || m.key === null || m.key === '')) {
      return fail(
        SqsErrorCode.MissingGroupId,
        `publishing ${m.id} to FIFO queue ${url} needs a key (the MessageGroupId); pass { key } to ctx.publish`,
      );
    }
    const headers = Object.entries(m.headers ?? {}).filter(
      ([name]) => name !== idHeader && name !== BODY_ENCODING_ATTRIBUTE,
    );
    const { text: body, base64 } = sqsBody(m.body);
    const count = headers.length + 1 + (base64 ? 1 : 0);
    if (count > MAX_ATTRIBUTES) {
      return fail(
        SqsErrorCode.TooManyAttributes,
        `message ${m.id} has ${count} attributes${base64 ? ` (with ${BODY_ENCODING_ATTRIBUTE}, its body being binary)` : ''}; SQS allows ${MAX_ATTRIBUTES}`,
      );
    }
    const attributes: Record<string, MessageAttributeValue> = {
      [idHeader]: { DataType: 'String', StringValue: m.id },
    };
    for (const [name, value] of headers)
      attributes[name] = { DataType: 'String', StringValue: String(value) };
    if (base64) attributes[BODY_ENCODING_ATTRIBUTE] = { DataType: 'String', StringValue: 'base64' };
    const bytes =
      Buffer.byteLength(body) +
      headers.reduce((n, [k, v]) => n + k.length + String(v).length, 0) +
      m.id.length +
      (base64 ? 40 : 0);
    return {
      index,
      url,
      bytes,
      entry: {
        MessageBody: body,
        MessageAttributes: attributes,
        ...(fifo
          ? {
              MessageGroupId: sqsToken(String(m.key)),
              MessageDeduplicationId: sqsToken(m.republish?.deduplicationId ?? m.id),
            }
          : {}),
      },
    };
  }

  /** One SendMessageBatch; returns the entries to try again. */
  async function send(
    url: string,
    chunk: Prepared[],
    results: PublishResult[],
    messages: readonly PublishMessage[],
    signal: AbortSignal | undefined,
  ) {
    const retry: Prepared[] = [];
    try {
      if (signal?.aborted) throw signal.reason;
      const res = await client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: chunk.map((p, i) => ({ ...p.entry, Id: String(i) })),
        }),
        signal ? { abortSignal: signal } : {},
      );
      const byId = new Map(chunk.map((p, i) => [String(i), p]));
      for (const s of res.Successful ?? []) {
        const p = byId.get(s.Id ?? '');
        if (!p) continue;
        byId.delete(s.Id ?? '');
        results[p.index] = { id: messages[p.index]!.id, ok: true, sqsMessageId: s.MessageId };
      }
      for (const f of res.Failed ?? []) {
        const p = byId.get(f.Id ?? '');
        if (!p) continue;
        byId.delete(f.Id ?? '');
        const error = serializeError(
          new OnceError(f.Code ?? SqsErrorCode.SendFailed, f.Message ?? 'SendMessageBatch entry failed'),
        );
        results[p.index] = { id: messages[p.index]!.id, ok: false, retryable: !f.SenderFault, error };
        if (!f.SenderFault) retry.push(p);
      }
      retry.push(...byId.values()); // named in neither list: try again
    } catch (err) {
      // Aborted: the request may have reached SQS all the same, so it is a failure to retry
      // (under the same id), never a success.
      const error = signal?.aborted ? (signal.reason ?? err) : err;
      for (const p of chunk) {
        results[p.index] = {
          id: messages[p.index]!.id,
          ok: false,
          retryable: true,
          error: serializeError(error),
        };
      }
      retry.push(...chunk);
    }
    return retry;
  }

  async function publish(
    messages: readonly PublishMessage[],
    options: OutboxPublishOptions = {},
  ): Promise<PublishResult[]> {
    const { signal } = options;
    const results: PublishResult[] = new Array(messages.length);
    let pending: Prepared[] = [];
    messages.forEach((m, i) => {
      const p = prepare(m, i);
      if ('entry' in p) pending.push(p);
      else results[i] = p;
    });
    for (let round = 0; pending.length > 0 && round <= maxRetries && !signal?.aborted; round++) {
      if (round > 0) await sleep(retryDelayMs * 2 ** (round - 1), signal);
      const byUrl = new Map<string, Prepared[]>();
      for (const p of pending) {
        const list = byUrl.get(p.url);
        if (list) list.push(p);
        else byUrl.set(p.url, [p]);
      }
      const calls: Promise<Prepared[]>[] = [];
      for (const [url, list] of byUrl) {
        // Calls to one queue go one after another so a key's messages keep their order.
        calls.push(
          (async () => {
            const again: Prepared[] = [];
            for (const chunk of chunks(list))
              again.push(...(await send(url, chunk, results, messages, signal)));
            return again;
          })(),
        );
      }
      pending = (await Promise.all(calls)).flat();
      if (pending.length > 0)
        logger.warn({ count: pending.length, round }, 'once/sqs: publish entries failed; retrying');
    }
    return results;
  }

  return Object.freeze({ publish });
}

function* chunks(list: Prepared[]): Generator<Prepared[]> {
  let chunk: Prepared[] = [];
  let bytes = 0;
  for (const p of list) {
    if (chunk.length === BATCH_MAX || (chunk.length > 0 && bytes + p.bytes > BATCH_BYTES)) {
      yield chunk;
      chunk = [];
      bytes = 0;
    }
    chunk.push(p);
    bytes += p.bytes;
  }
  if (chunk.length > 0) yield chunk;
}
