/**
 * What every engine module shares, built once per inbox by the facade: the resolved options, the
 * statements, the outcome builder, the events, and the hook that reports a setup fault. Decides
 * nothing itself.
 */

import type { Events } from '../message/events.js';
import { type InboxSql, inboxSql } from '../sql/inbox.js';
import type { ResolvedInboxOptions } from './options.js';
import { Outcomes } from './outcomes.js';

export interface EngineContext<R> {
  readonly o: ResolvedInboxOptions<R>;
  readonly sql: InboxSql;
  readonly out: Outcomes<R>;
  readonly events: Events;
  /** Once's schema or database cannot be used: not the message's fault (see Readiness). */
  readonly setupFault: (err: unknown) => void;
}

export function engineContext<R>(
  o: ResolvedInboxOptions<R>,
  events: Events,
  setupFault: (err: unknown) => void,
): EngineContext<R> {
  return Object.freeze({
    o,
    sql: inboxSql(o.quotedSchema),
    out: new Outcomes(o),
    events,
    setupFault,
  });
}
