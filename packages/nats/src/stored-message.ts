import type { JsMsg } from '@nats-io/jetstream';

/**
 * Which stored message a delivery is, in names JetStream cannot give to another one.
 *
 * A stream sequence is a position, not an identity: a stream deleted and created again under its
 * name numbers its messages from 1 again. What tells two stored messages at one position apart is
 * the moment JetStream stored each: a stream's messages are stored after it was created, and a
 * stream created again after the old one was deleted, so the old message and the new one at a
 * sequence never share a store time (to the nanosecond, on the server's clock). The store time
 * comes with every delivery, in its ack subject, and is the same on every redelivery.
 */

/**
 * When JetStream stored a delivered message, in nanoseconds since the epoch, in decimal; undefined
 * for a message that did not come from JetStream. `timestampNanos` reads it from the ack subject as
 * a bigint (`info.timestampNanos` is a JS number, which rounds it: nanoseconds are past 2^53).
 */
export function storedAtOf(m: Pick<JsMsg, 'timestampNanos'>): string | undefined {
  try {
    const at = m.timestampNanos;
    return typeof at === 'bigint' && at > 0n ? at.toString() : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The message id `idFrom: 'sequence'` gives a stored message: `<sequence>@<store time in ns>`. It
 * holds an `@`, so it is never a bare sequence, the id of earlier versions (see legacy-generation.ts).
 */
export function sequenceId(sequence: number, storedAt: string): string {
  return `${sequence}@${storedAt}`;
}

/** `%` and `:` escaped, so that the fields of a dead-letter msgID never run into each other. */
function field(name: string): string {
  return name.replace(/%/g, '%25').replace(/:/g, '%3A');
}

/**
 * `Nats-Msg-Id` of the dead-letter copy of a stored message, for one durable: one copy however
 * often dead-lettering it is tried, and never the copy of another message. The store time is in
 * it because the sequence alone is shared by a recreated stream's message: JetStream would drop
 * its dead letter as a duplicate of the old message's within the dead-letter stream's
 * `duplicate_window`, and the message would be termed with no copy anywhere.
 */
export function deadLetterMsgId(stream: string, sequence: number, storedAt: string, durable: string): string {
  return `once-dead:${field(stream)}:${sequenceId(sequence, storedAt)}:${field(durable)}`;
}
