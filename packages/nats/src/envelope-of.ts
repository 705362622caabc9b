import type { JsMsg } from '@nats-io/jetstream';
import type { Envelope } from '@once/core';
import { decodedIdCheck } from '@once/core/adapter';
import type { ResolvedNatsConsumerOptions } from './options.js';
import { sequenceId, storedAtOf } from './stored-message.js';

/** A message's headers as text, one value per name (the last one where a name repeats). */
export function headersOf(m: Pick<JsMsg, 'headers'>): Record<string, string> {
  const out: Record<string, string> = {};
  if (!m.headers) return out;
  for (const [name, values] of m.headers) {
    const v = values[values.length - 1];
    if (v !== undefined) out[name] = v;
  }
  return out;
}

/** A delivered message, and which generation of its stream the fetch loop found it in. */
export interface Placed {
  readonly m: JsMsg;
  /**
   * It belongs to the stream generation whose messages keep bare sequence ids
   * (legacy-generation.ts): with `idFrom: 'sequence'` its id is the sequence alone.
   */
  readonly legacy: boolean;
}

/**
 * Maps a JetStream delivery to core's envelope. The id is the `idHeader` header (`Nats-Msg-Id`,
 * what JetStream deduplicates publishes on), or with `idFrom: 'sequence'` the stored message's
 * `<sequence>@<store time>` (the sequence alone for a message of the legacy generation); `idOf`
 * overrides both. `redelivered` (a delivery count above one: a nak, an expired `ack_wait`, a
 * consumer that died) only marks the delivery as suspect: it runs alone and its starts are
 * counted by core, since JetStream counts deliveries, not runs. The key is the subject. Header
 * values arrive decoded as UTF-8, so an id holding U+FFFD is refused (`decodedIdCheck`).
 */
export function envelopeOf(
  { m, legacy }: Placed,
  o: Pick<ResolvedNatsConsumerOptions, 'idFrom' | 'idHeader' | 'durable'>,
): Envelope {
  const headers = headersOf(m);
  const seq = m.info.streamSequence;
  let id: string | undefined;
  let unusable: Pick<Envelope, 'idUnusable'>;
  if (o.idFrom === 'header') {
    id = headers[o.idHeader];
    unusable = decodedIdCheck(id);
  } else if (legacy) {
    id = String(seq);
    unusable = {};
  } else {
    const storedAt = storedAtOf(m);
    id = storedAt === undefined ? undefined : sequenceId(seq, storedAt);
    unusable = id === undefined ? { idUnusable: 'its ack subject holds no store time' } : {};
  }
  return {
    id,
    ...unusable,
    body: Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength),
    headers,
    key: m.subject,
    source: { broker: 'nats', queue: m.subject, offset: String(seq), group: o.durable },
    attempt: 1,
    redelivered: m.info.deliveryCount > 1,
  };
}
