import { createHash } from 'node:crypto';
import {
  type MessageAttributeValue,
  SendMessageBatchCommand,
  type SendMessageBatchRequestEntry,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import {
  checkNumber,
  type Logger,
  OnceError,
  type OutboxPublisher,
  type SerializedError,
  serializeError,
  silentLogger,
} from '@once/core';
import { SqsErrorCode } from './queue-info.js';

/** One message to publish; core's `OutboxMessage` (what the relay hands over) fits. */
export interface PublishMessage {
  /** The outbox id: sent as the `message-id` attribute and as the FIFO MessageDeduplicationId. */
  id: string;
  /** The outbox destination: a queue URL, or a name that `queueUrl`/`queueUrlOf` maps to one. */
  destination: string;
  /** The FIFO MessageGroupId; required for FIFO queues. */
  key?: string | null | undefined;
  body: Buffer | string;
  /** Extra String message attributes (SQS allows ten in all, the id included). */
  headers?: Readonly<Record<string, string>> | undefined;
}

/** The fate of one message: mark the outbox row sent only when `ok`. */
export type PublishResult =
  | { id: string; ok: true; sqsMessageId: string | undefined }
  | { id: string; ok: false; retryable: boolean; error: SerializedError };

/** Options of {@link createSqsPublisher}. */
export interface SqsPublisherOptions {
  client: SQSClient;
  /** The attribute carrying the id, read by once's consumers. @default 'message-id' */
  idAttribute?: string;
  /** Sends everything to this queue, whatever the destination is called (one publisher per relay destination). */
  queueUrl?: string;
  /** Maps a destination to a queue URL. @default `queueUrl`, else the destination is the URL */
  queueUrlOf?: (destination: string) => string;
  /** Extra rounds for entries that failed on SQS's side (or whose call failed). @default 3 */
  maxRetries?: number;
  /** Delay before the first extra round, doubling after, in ms. @default 100 */
  retryDelayMs?: number;
  /** @default silent */
  logger?: Logger;
}

/** Publishes outbox rows to SQS; see {@link createSqsPublisher}. It is core's `OutboxPublisher`: give it to `createRelay`. */
export interface SqsPublisher extends OutboxPublisher {
  /** Sends every message and returns one result per message, in input order. Never throws for a message's sake. */
  publish(messages: readonly PublishMessage[]): Promise<PublishResult[]>;
}

const BATCH_MAX = 10;
const BATCH_BYTES = 256 * 1024;
const MAX_ATTRIBUTES = 10;
const SQS_TOKEN = /^[\x21-\x7e]{1,128}$/;

/** A valid SQS dedup/group token: the value itself when it fits, else its SHA-256 (stable, 64 hex chars). */
export function sqsToken(value: string): string {
  return SQS_TOKEN.test(value) ? value : createHash('sha256').update(value).digest('hex');
}

interface Prepared {
  index: number;
  url: string;
  entry: Omit<SendMessageBatchRequestEntry, 'Id'>;
  bytes: number;
}

/**
 * Creates the outbox's SQS publisher: SendMessageBatch per destination in calls of up to ten, the
 * outbox id in the `message-id` attribute and, on FIFO queues, as MessageDeduplicationId with the
 * key as MessageGroupId. SQS reports per-entry failures inside a successful response; those (and
 * whole failed calls) are retried `maxRetries` times, then reported, so the relay leaves the row
 * pending. A message SQS rejects as malformed (sender fault) is not retried.
 */
export function createSqsPublisher(options: SqsPublisherOptions): SqsPublisher {
  if (!options || typeof (options.client as { send?: unknown })?.send !== 'function') {
    throw new OnceError('INVALID_OPTION', 'options.client must be an SQSClient');
  }
  const idAttribute = options.idAttribute ?? 'message-id';
  if (typeof idAttribute !== 'string' || idAttribute.length === 0) {
    throw new OnceError('INVALID_OPTION', 'options.idAttribute must be a non-empty string');
  }
  if (options.queueUrlOf !== undefined && typeof options.queueUrlOf !== 'function') {
    throw new OnceError('INVALID_OPTION', 'options.queueUrlOf must be a function');
  }
  const maxRetries = checkNumber('maxRetries', options.maxRetries ?? 3, 0);
  const retryDelayMs = checkNumber('retryDelayMs', options.retryDelayMs ?? 100, 0);
  const logger = options.logger ?? silentLogger;
  const { client } = options;
  if (options.queueUrl !== undefined && !/^https?:\/\/\S+$/.test(options.queueUrl)) {
    throw new OnceError(
      'INVALID_OPTION',
      `options.queueUrl must be an http(s) queue URL, got ${JSON.stringify(options.queueUrl)}`,
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
    if (typeof m.id !== 'string' || m.id.length === 0) return fail('INVALID_ID', 'outbox message has no id');
    const url = urlOf(m.destination);
    const fifo = url.endsWith('.fifo');
    if (fifo && (m.key === undefined || m.key === null || m.key === '')) {
      return fail(
        SqsErrorCode.MissingGroupId,
        `publishing ${m.id} to FIFO queue ${url} needs a key (the MessageGroupId); pass { key } to ctx.publish`,
      );
    }
    const headers = Object.entries(m.headers ?? {}).filter(([name]) => name !== idAttribute);
    if (headers.length + 1 > MAX_ATTRIBUTES) {
      return fail(
        'TOO_MANY_ATTRIBUTES',
        `message ${m.id} has ${headers.length + 1} attributes; SQS allows ${MAX_ATTRIBUTES}`,
      );
    }
    const attributes: Record<string, MessageAttributeValue> = {
      [idAttribute]: { DataType: 'String', StringValue: m.id },
    };
    for (const [name, value] of headers)
      attributes[name] = { DataType: 'String', StringValue: String(value) };
    const body = typeof m.body === 'string' ? m.body : m.body.toString('utf8');
    const bytes =
      Buffer.byteLength(body) +
      headers.reduce((n, [k, v]) => n + k.length + String(v).length, 0) +
      m.id.length;
    return {
      index,
      url,
      bytes,
      entry: {
        MessageBody: body,
        MessageAttributes: attributes,
        ...(fifo ? { MessageGroupId: sqsToken(String(m.key)), MessageDeduplicationId: sqsToken(m.id) } : {}),
      },
    };
  }

  /** One SendMessageBatch; returns the entries to try again. */
  async function send(
    url: string,
    chunk: Prepared[],
    results: PublishResult[],
    messages: readonly PublishMessage[],
  ) {
    const retry: Prepared[] = [];
    try {
      const res = await client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: chunk.map((p, i) => ({ ...p.entry, Id: String(i) })),
        }),
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
          new OnceError(f.Code ?? 'SEND_FAILED', f.Message ?? 'SendMessageBatch entry failed'),
        );
        results[p.index] = { id: messages[p.index]!.id, ok: false, retryable: !f.SenderFault, error };
        if (!f.SenderFault) retry.push(p);
      }
      retry.push(...byId.values()); // named in neither list: try again
    } catch (err) {
      for (const p of chunk) {
        results[p.index] = {
          id: messages[p.index]!.id,
          ok: false,
          retryable: true,
          error: serializeError(err),
        };
      }
      retry.push(...chunk);
    }
    return retry;
  }

  async function publish(messages: readonly PublishMessage[]): Promise<PublishResult[]> {
    const results: PublishResult[] = new Array(messages.length);
    let pending: Prepared[] = [];
    messages.forEach((m, i) => {
      const p = prepare(m, i);
      if ('entry' in p) pending.push(p);
      else results[i] = p;
    });
    for (let round = 0; pending.length > 0 && round <= maxRetries; round++) {
      if (round > 0) await new Promise((r) => setTimeout(r, retryDelayMs * 2 ** (round - 1)));
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
            for (const chunk of chunks(list)) again.push(...(await send(url, chunk, results, messages)));
            return again;
          })(),
        );
      }
      pending = (await Promise.all(calls)).flat();
      if (pending.length > 0)
        logger.warn('once/sqs: publish entries failed; retrying', { count: pending.length, round });
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
