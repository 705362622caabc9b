import type { OnceEventMap } from '@once/core';
import type { Attributes } from '@opentelemetry/api';
import { Attr, errorTypeOf, messageAttributes, semconvAttributes } from './attributes.js';
import type { EventInstruments } from './instruments.js';
import type { InboxLike } from './targets.js';

type Outcome = 'processed' | 'duplicate' | 'conflict' | 'failed' | 'retry' | 'not-run' | 'busy';
type OutcomeEvent<O extends Outcome> = OnceEventMap[`message:${O}`];

/**
 * Feeds `once.messages`, `once.process.duration`, `once.handler.duration`,
 * `once.lease.takeovers` and the semantic conventions' `messaging.process.duration` and
 * `messaging.client.consumed.messages` from an inbox's events. Every delivery reaches exactly one
 * outcome event, so each is counted once. Returns the function that unsubscribes.
 */
export function subscribeInbox(inbox: InboxLike, m: EventInstruments): () => void {
  const outcome = <O extends Outcome>(
    status: O,
    extra?: (e: OutcomeEvent<O>) => Attributes,
    errorOf?: (e: OutcomeEvent<O>) => string,
  ) => {
    return inbox.on(`message:${status}`, (e: OutcomeEvent<O>) => {
      const attrs = {
        ...messageAttributes(e.consumer, e.source),
        [Attr.outcome]: status,
        ...(e.database === undefined ? {} : { [Attr.dbNamespace]: e.database }),
        ...extra?.(e),
      };
      const seconds = e.durationMs / 1000;
      m.messages.add(1, attrs);
      m.processDuration.record(seconds, attrs);
      // error.type if and only if the process operation failed (the conventions' rule).
      const semconv = semconvAttributes(e.consumer, e.source, errorOf?.(e));
      m.messagingConsumedMessages.add(1, semconv);
      m.messagingProcessDuration.record(seconds, semconv);
    });
  };
  const off = [
    outcome('processed'),
    outcome('duplicate'),
    outcome('conflict', (e) => ({ [Attr.conflictAction]: e.action })),
    outcome(
      'failed',
      (e) => ({ [Attr.failReason]: e.reason, [Attr.errorType]: errorTypeOf(e.error) }),
      (e) => errorTypeOf(e.error),
    ),
    outcome(
      'retry',
      (e) => ({ [Attr.errorType]: errorTypeOf(e.error) }),
      (e) => errorTypeOf(e.error),
    ),
    // The handler never started (behind a message to retry first, or the database unavailable):
    // an outcome of its own, never a retry, whose attempts it does not spend.
    outcome(
      'not-run',
      (e) => ({ [Attr.notRunReason]: e.why, [Attr.errorType]: errorTypeOf(e.error) }),
      (e) => errorTypeOf(e.error),
    ),
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
