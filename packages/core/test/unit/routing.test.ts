import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Router, resolveRouting } from '../../src/engine/routing.js';
import type { Envelope } from '../../src/message/envelope.js';
import type { PgPoolLike } from '../../src/pg/pg-like.js';

// The router's decision against a model of the test's own: an unbounded record of the database
// each id and each (topic, ordering key) was first placed in, with the rules written out plainly.

const pool = { query: async () => ({ rows: [] }), connect: async () => ({}) } as unknown as PgPoolLike;
const NAMES = ['a', 'b', 'c'];

interface Delivery {
  id: string;
  key: string | undefined;
  broker: 'kafka' | 'sqs' | 'rabbitmq' | 'nats';
  queue: string;
  /** What route() answers: a name of the set, an unknown name, or a throw. */
  answer: string | { throws: true };
}

const delivery: fc.Arbitrary<Delivery> = fc.record({
  id: fc.constantFrom('m1', 'm2', 'm3', 'm4', ''),
  key: fc.option(fc.constantFrom('k1', 'k2', ''), { nil: undefined }),
  broker: fc.constantFrom('kafka', 'sqs', 'rabbitmq', 'nats'),
  queue: fc.constantFrom('orders', 'payments'),
  answer: fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom(...NAMES) },
    { weight: 1, arbitrary: fc.constant('nowhere') },
    { weight: 1, arbitrary: fc.constant({ throws: true as const }) },
  ),
});

function envelopeOf(d: Delivery): Envelope {
  return {
    id: d.id,
    key: d.key,
    body: Buffer.alloc(0),
    headers: {},
    source: { broker: d.broker, queue: d.queue },
    attempt: 1,
    redelivered: false,
  } as unknown as Envelope;
}

type Expected = { database: string; id: string | undefined } | { error: RegExp };

class Model {
  readonly ids = new Map<string, string>();
  readonly keys = new Map<string, string>();
  place(d: Delivery): Expected {
    if (typeof d.answer !== 'string') return { error: /route\(\) threw/ };
    if (!NAMES.includes(d.answer)) return { error: /not one of the databases/ };
    const name = d.answer;
    const hasId = d.id !== '';
    if (hasId && this.ids.has(d.id) && this.ids.get(d.id) !== name) return { error: /the same id to/ };
    const ordered = (d.broker === 'kafka' || d.broker === 'sqs') && d.key !== undefined && d.key !== '';
    const slot = `${d.queue}/${d.key}`;
    if (ordered && this.keys.has(slot) && this.keys.get(slot) !== name) return { error: /the same key to/ };
    if (ordered && !this.keys.has(slot)) this.keys.set(slot, name);
    if (hasId && !this.ids.has(d.id)) this.ids.set(d.id, name);
    return { database: name, id: hasId ? d.id : undefined };
  }
}

function routerFor(answers: Map<Envelope, Delivery['answer']>, memory?: number): Router {
  const routing = resolveRouting({
    databases: Object.fromEntries(NAMES.map((n) => [n, pool])),
    route: (e: Envelope) => {
      const a = answers.get(e);
      if (a === undefined || typeof a !== 'string') throw new Error('no tenant');
      return a;
    },
  })!;
  return new Router(routing, undefined, memory);
}

describe('Router.place', () => {
  it('agrees with the model on any sequence of deliveries', () => {
    fc.assert(
      fc.property(fc.array(delivery, { maxLength: 40 }), (ds) => {
        const answers = new Map<Envelope, Delivery['answer']>();
        const router = routerFor(answers);
        const model = new Model();
        for (const d of ds) {
          const e = envelopeOf(d);
          answers.set(e, d.answer);
          const got = router.place(e);
          const want = model.place(d);
          if ('database' in want) expect(got).toEqual(want);
          else {
            expect('error' in got && got.error.code).toBe('UNROUTABLE');
            expect('error' in got && got.error.message).toMatch(want.error);
          }
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('never throws, whatever route() returns or throws', () => {
    const odd = fc.oneof(fc.anything(), fc.constantFrom(...NAMES));
    fc.assert(
      fc.property(fc.array(fc.tuple(odd, fc.boolean()), { maxLength: 10 }), (answers) => {
        let i = 0;
        const routing = resolveRouting({
          databases: { a: pool, b: pool, c: pool },
          route: () => {
            const [value, throws] = answers[i++ % Math.max(1, answers.length)] ?? [undefined, false];
            if (throws) throw value;
            return value as string;
          },
        })!;
        const router = new Router(routing, undefined);
        for (let n = 0; n < answers.length; n++) {
          const got = router.place(
            envelopeOf({ id: `m${n}`, key: undefined, broker: 'kafka', queue: 'q', answer: 'a' }),
          );
          expect('database' in got || ('error' in got && got.error.code === 'UNROUTABLE')).toBe(true);
        }
      }),
    );
  });

  it('remembers the last memory/2 ids at least and memory at most: an older one is forgotten', () => {
    const answers = new Map<Envelope, Delivery['answer']>();
    const router = routerFor(answers, 4);
    const at = (id: string, answer: string) => {
      const e = envelopeOf({ id, key: undefined, broker: 'nats', queue: 'q', answer });
      answers.set(e, answer);
      return router.place(e);
    };
    at('m1', 'a');
    at('m2', 'a');
    expect(at('m1', 'b')).toHaveProperty('error');
    at('m3', 'a');
    expect(at('m2', 'b')).toHaveProperty('error');
    at('m4', 'a');
    // m1 and m2 were two generations back: a second database is no longer noticed for them.
    expect(at('m1', 'b')).toEqual({ database: 'b', id: 'm1' });
    router.forget('a');
    expect(at('m4', 'c')).toEqual({ database: 'c', id: 'm4' });
    router.forget();
    expect(at('m1', 'c')).toEqual({ database: 'c', id: 'm1' });
  });
});
