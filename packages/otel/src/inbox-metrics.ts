import type { OnceEventMap } from '@once/core';
import type { Attributes } from '@opentelemetry/api';
import { Attr, errorTypeOf, messageAttributes } from './attributes.js';
import type { EventInstruments } from './instruments.js';
import type { InboxLike } from './targets.js';

type Outcome = 'processed' | 'duplicate' | 'conflict' | 'failed' | 'retry' | 'busy';
type OutcomeEvent<O extends Outcome> = OnceEventMap[`message:${O}`];

/**
 * Feeds `once.messages`, `once.process.duration`, `once.handler.duration` and
 * `once.lease.takeovers` from an inbox's events. Returns the function that unsubscribes.
 */
export function subscribeInbox(inbox: InboxLike, m: EventInstruments): () => void {
  const outcome = <O extends Outcome>(status: O, extra?: (e: OutcomeEvent<O>) => Attributes) => {
    return inbox.on(`message:${status}`, (e: OutcomeEvent<O>) => {
      const attrs = { ...messageAttributes(e.consumer, e.source), [Attr.outcome]: status, ...extra?.(e) };
      m.messages.add(1, attrs);
      m.processDuration.record(e.durationMs / 1000, attrs);
    });
  };
  const off = [
    outcome('processed'),
    outcome('duplicate'),
    outcome('conflict', (e) => ({ [Attr.conflictAction]: e.action })),
    outcome('failed', (e) => ({ [Attr.failReason]: e.reason, [Attr.errorType]: errorTypeOf(e.error) })),
    outcome('retry', (e) => ({ [Attr.errorType]: errorTypeOf(e.error) })),
    outcome('busy'),
    inbox.on('handler:settled', (e) => {
      const attrs = messageAttributes(e.consumer, e.source);
      if (e.error) attrs[Attr.errorType] = errorTypeOf(e.error);
      m.handlerDuration.record(e.durationMs / 1000, attrs);
    }),
    inbox.on('lease:takeover', (e) => {
      m.leaseTakeovers.add(1, messageAttributes(e.consumer, e.source));
    }),
  ];
  return () => {
    for (const f of off) f();
  };
}
