import { expect, it } from 'vitest';
import { createInbox } from '../../src/inbox.js';
import type { Envelope } from '../../src/message/envelope.js';

it('notRun: the messages an adapter sends back behind a retry come back not-run (behind), each with its event', () => {
  const inbox = createInbox({
    // Never queried: notRun touches no database.
    pool: {
      query: async () => {
        throw new Error('no database here');
      },
      connect: async () => {
        throw new Error('no database here');
      },
    } as never,
    consumer: 'not-run-test',
    handler: () => {},
    logger: false,
  });
  const events: { id: string | undefined; why: string; consumer: string }[] = [];
  inbox.on('message:not-run', (e) => events.push({ id: e.id, why: e.why, consumer: e.consumer }));
  const envelopes = ['a', 'b'].map(
    (id): Envelope => ({
      id,
      body: Buffer.from(id),
      headers: {},
      source: { broker: 'test', queue: 'q' },
      attempt: 1,
      redelivered: false,
    }),
  );
  const outcomes = inbox.notRun(envelopes);
  expect(outcomes.map((o) => [o.status, o.id, o.status === 'not-run' ? o.why : ''])).toEqual([
    ['not-run', 'a', 'behind'],
    ['not-run', 'b', 'behind'],
  ]);
  expect(outcomes[0]!.envelope).toBe(envelopes[0]);
  expect(events).toEqual([
    { id: 'a', why: 'behind', consumer: 'not-run-test' },
    { id: 'b', why: 'behind', consumer: 'not-run-test' },
  ]);
});
