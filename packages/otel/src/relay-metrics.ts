import { Attr, errorTypeOf } from './attributes.js';
import type { EventInstruments } from './instruments.js';
import type { RelayLike } from './targets.js';

/** Feeds `once.outbox.messages` from a relay's events. Returns the function that unsubscribes. */
export function subscribeRelay(relay: RelayLike, m: EventInstruments): () => void {
  const off = [
    // The relay reports sent rows as a count per round, without their destinations.
    relay.on('outbox:published', (e) => m.outboxMessages.add(e.count, { [Attr.outboxResult]: 'sent' })),
    relay.on('outbox:publish-failed', (e) =>
      m.outboxMessages.add(1, {
        [Attr.outboxResult]: 'failed',
        [Attr.destination]: e.destination,
        [Attr.errorType]: errorTypeOf(e.error),
      }),
    ),
    relay.on('outbox:parked', (e) =>
      m.outboxMessages.add(1, {
        [Attr.outboxResult]: 'parked',
        [Attr.destination]: e.destination,
        [Attr.errorType]: errorTypeOf(e.error),
      }),
    ),
  ];
  return () => {
    for (const f of off) f();
  };
}
