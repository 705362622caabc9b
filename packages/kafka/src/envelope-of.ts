import type { Envelope, Liveness } from '@once/core';
import type { ClientHeaders, ClientMessage } from './client/types.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Where a message was read, and how to derive its id. */
export interface EnvelopeContext {
  topic: string;
  partition: number;
  groupId: string;
  idHeader: string;
  idFrom: 'header' | 'offset';
  attempt: number;
  redelivered: boolean;
  /** Lease mode: the batch's liveness (its renewals are heartbeats of the session). @default none */
  liveness?: Liveness | undefined;
}

/** A message and its envelope. */
export interface MappedMessage {
  message: ClientMessage;
  envelope: Envelope;
}

/** Decodes one header value; `undefined` when it is absent or not valid UTF-8. */
function decode(value: Buffer | string): string | undefined {
  if (typeof value === 'string') return value;
  try {
    return utf8.decode(value);
  } catch {
    return undefined;
  }
}

/** Every value of a header as raw bytes-or-strings; Kafka allows a key to repeat. */
function valuesOf(raw: ClientHeaders[string]): (Buffer | string)[] {
  if (raw === undefined) return [];
  return Array.isArray(raw) ? raw : [raw];
}

/**
 * Maps a consumed message to an {@link Envelope}. Headers are decoded as UTF-8; a header that is
 * not valid UTF-8 is left out of `envelope.headers` (the dead-letter copy keeps the raw bytes).
 * A repeated header keeps its last value. An id header that is not valid UTF-8, or that repeats
 * with different values, makes the id unusable (`idUnusable`): core fails the message
 * `invalid-id` unless `idOf` decides the id.
 */
export function envelopeOf(message: ClientMessage, ctx: EnvelopeContext): MappedMessage {
  const headers: Record<string, string | undefined> = {};
  for (const [name, raw] of Object.entries(message.headers ?? {})) {
    const values = valuesOf(raw);
    const last = values[values.length - 1];
    headers[name] = last === undefined ? undefined : decode(last);
  }
  let id: string | undefined;
  let idUnusable: string | undefined;
  if (ctx.idFrom === 'offset') {
    id = `${ctx.topic}/${ctx.partition}/${message.offset}`;
  } else {
    const values = valuesOf(message.headers?.[ctx.idHeader]);
    const decoded = values.map(decode);
    if (decoded.some((v) => v === undefined)) {
      idUnusable = `the ${ctx.idHeader} header is not valid UTF-8; publish ids as UTF-8 text or pass idOf`;
    } else if (new Set(decoded).size > 1) {
      idUnusable = `the ${ctx.idHeader} header appears ${values.length} times with different values; a message has one id`;
    } else {
      id = decoded[0];
    }
  }
  const key = message.key === null || message.key === undefined ? undefined : decode(message.key);
  const envelope: Envelope = {
    id,
    ...(idUnusable === undefined ? {} : { idUnusable }),
    body: message.value ?? Buffer.alloc(0),
    headers,
    key,
    source: {
      broker: 'kafka',
      queue: ctx.topic,
      partition: ctx.partition,
      offset: message.offset,
      group: ctx.groupId,
    },
    attempt: ctx.attempt,
    redelivered: ctx.redelivered,
    ...(ctx.liveness === undefined ? {} : { liveness: ctx.liveness }),
  };
  return { message, envelope };
}
