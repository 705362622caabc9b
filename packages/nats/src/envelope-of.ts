import type { JsMsg } from '@nats-io/jetstream';
import type { Envelope } from '@once/core';
import { decodedIdCheck } from '@once/core/adapter';
import type { ResolvedNatsConsumerOptions } from './options.js';

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

/**
 * Maps a JetStream delivery to core's envelope. The id is the `idHeader` header (`Nats-Msg-Id`,
 * what JetStream deduplicates publishes on), or the stream sequence with `idFrom: 'sequence'`;
 * `idOf` overrides both. `redelivered` (a delivery count above one: a nak, an expired `ack_wait`,
 * a consumer that died) only marks the delivery as suspect: it runs alone and its starts are
 * counted by core, since JetStream counts deliveries, not runs. The key is the subject. Header
 * values arrive decoded as UTF-8, so an id holding U+FFFD is refused (`decodedIdCheck`).
 */
export function envelopeOf(
  m: JsMsg,
  o: Pick<ResolvedNatsConsumerOptions, 'idFrom' | 'idHeader' | 'durable'>,
): Envelope {
  const headers = headersOf(m);
  const seq = m.info.streamSequence;
  const id = o.idFrom === 'sequence' ? String(seq) : headers[o.idHeader];
  return {
    id,
    ...decodedIdCheck(id),
    body: Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength),
    headers,
    key: m.subject,
    source: { broker: 'nats', queue: m.subject, offset: String(seq), group: o.durable },
    attempt: 1,
    redelivered: m.info.deliveryCount > 1,
  };
}
