/**
 * Turns an outcome into its `message:*` event. Decides nothing: the event is built only when
 * someone listens.
 */

import type { Events } from '../message/events.js';
import type { Outcome } from '../message/outcome.js';

/** Each outcome's event name, made once (not a new string per message). */
const EVENT_OF = {
  processed: 'message:processed',
  duplicate: 'message:duplicate',
  conflict: 'message:conflict',
  failed: 'message:failed',
  retry: 'message:retry',
  'not-run': 'message:not-run',
  busy: 'message:busy',
} as const satisfies Record<Outcome['status'], `message:${Outcome['status']}`>;

/** Emits `o`'s event; `started` is when processing began (performance.now() ms); `database`: the routed database's name, if any. */
export function emitOutcome(
  events: Events,
  consumer: string,
  o: Outcome,
  started: number,
  database?: string,
): void {
  if (!events.has(EVENT_OF[o.status])) return;
  const base = {
    consumer,
    source: o.envelope.source,
    durationMs: performance.now() - started,
    ...(database === undefined ? {} : { database }),
  };
  if (o.status === 'processed') events.emit('message:processed', { ...base, id: o.id });
  else if (o.status === 'duplicate') events.emit('message:duplicate', { ...base, id: o.id });
  else if (o.status === 'conflict') events.emit('message:conflict', { ...base, id: o.id, action: o.action });
  else if (o.status === 'failed')
    events.emit('message:failed', { ...base, id: o.id, reason: o.reason, error: o.error });
  else if (o.status === 'retry') {
    events.emit('message:retry', { ...base, id: o.id, error: o.error, delayMs: o.delayMs, spent: o.spent });
  } else if (o.status === 'not-run') {
    events.emit('message:not-run', { ...base, id: o.id, why: o.why, error: o.error, delayMs: o.delayMs });
  } else events.emit('message:busy', { ...base, id: o.id });
}
