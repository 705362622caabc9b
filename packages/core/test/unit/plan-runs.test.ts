import { describe, expect, it } from 'vitest';
import { type Item, type Prepared, prepare } from '../../src/engine/item.js';
import { planRuns, type Run, runInOrder } from '../../src/engine/plan-runs.js';
import { PermanentError } from '../../src/errors.js';
import type { Envelope } from '../../src/message/envelope.js';
import { fingerprintHex } from '../../src/message/fingerprint.js';
import type { Outcome } from '../../src/message/outcome.js';

const env = (id: string, over: Partial<Envelope> = {}): Envelope => ({
  id,
  body: Buffer.from(id),
  headers: {},
  source: { broker: 'test', queue: 'q' },
  attempt: 1,
  redelivered: false,
  ...over,
});
const again = (id: string) => env(id, { attempt: 2, redelivered: true });
const item = (e: Envelope): Prepared => ({
  kind: 'item',
  item: { envelope: e, id: e.id!, fpHex: fingerprintHex(''), handler: undefined, starts: undefined },
});

/** A run as ids, e.g. `batch:a,b`. */
const shape = (runs: Run[]) =>
  runs.map((r) => {
    switch (r.kind) {
      case 'one':
        return `one:${r.item.id}`;
      case 'batch':
        return `${r.kind}:${r.items.map((i) => i.id).join(',')}`;
      case 'invalid-id':
        return `invalid-id:${r.envelope.id}`;
      case 'unplaceable':
        return `unplaceable:${r.item.id}`;
    }
    return r satisfies never;
  });

describe('planRuns: which messages share a transaction', () => {
  it('batches fresh messages in a row and runs a redelivered one alone, in order', () => {
    const runs = planRuns(
      [item(env('a')), item(env('b')), item(again('r')), item(env('c')), item(env('d'))],
      true,
    );
    expect(shape(runs)).toEqual(['batch:a,b', 'one:r', 'batch:c,d']);
  });

  it('runs a lone fresh message as a single transaction, and a redelivery by attempt alone', () => {
    const runs = planRuns([item(env('a')), item(env('x', { attempt: 3 })), item(env('b'))], true);
    expect(shape(runs)).toEqual(['one:a', 'one:x', 'one:b']);
  });

  it('runs every message alone when batching is off (process(), or batching paused)', () => {
    expect(shape(planRuns([item(env('a')), item(env('b'))], false))).toEqual(['one:a', 'one:b']);
  });

  it('keeps messages that could not become items in place, cutting the runs around them', () => {
    const bad: Prepared = { kind: 'invalid-id', envelope: env('bad'), error: new Error('no id') };
    const unplaceable: Prepared = {
      kind: 'unplaceable',
      item: { envelope: env('u'), id: 'u', fpHex: fingerprintHex(''), handler: undefined, starts: undefined },
      error: new PermanentError('fingerprintOf threw'),
    };
    const runs = planRuns(
      [item(env('a')), item(env('b')), bad, item(env('c')), unplaceable, item(env('d'))],
      true,
    );
    expect(shape(runs)).toEqual(['batch:a,b', 'invalid-id:bad', 'one:c', 'unplaceable:u', 'one:d']);
  });
});

describe('runInOrder: stop propagation', () => {
  const outcome = (e: Envelope, status: 'processed' | 'retry'): Outcome =>
    status === 'processed'
      ? { status, id: e.id!, envelope: e, result: undefined }
      : { status, id: e.id, envelope: e, error: { name: 'Error', message: 'x' }, delayMs: 0, spent: true };
  const notRun = (envelope: Envelope, id: string | undefined): Outcome => ({
    status: 'not-run',
    id: id ?? envelope.id,
    envelope,
    why: 'behind',
    error: { name: 'Error', message: 'behind' },
    delayMs: 0,
  });
  const itemsOf = (r: Run): Item[] =>
    r.kind === 'batch' ? r.items : r.kind === 'invalid-id' ? [] : [r.item];

  it('runs nothing after a stop: every later message is not-run, outcomes in input order', async () => {
    const bad: Prepared = { kind: 'invalid-id', envelope: env('bad'), error: new Error('no id') };
    const runs = planRuns([item(env('a')), item(again('r')), item(env('b')), item(env('c')), bad], true);
    const ran: string[] = [];
    const out = await runInOrder(
      runs,
      (run) => {
        ran.push(...itemsOf(run).map((i) => i.id));
        return itemsOf(run).map((i) => outcome(i.envelope, i.id === 'r' ? 'retry' : 'processed'));
      },
      notRun,
    );
    expect(ran).toEqual(['a', 'r']);
    expect(out.map((o) => `${o.id}:${o.status}`)).toEqual([
      'a:processed',
      'r:retry',
      'b:not-run',
      'c:not-run',
      'bad:not-run',
    ]);
  });

  it('stops after a batch whose outcomes hold a stop', async () => {
    const runs = planRuns([item(env('a')), item(env('b')), item(again('r'))], true);
    const out = await runInOrder(
      runs,
      async (run) => itemsOf(run).map((i) => outcome(i.envelope, i.id === 'b' ? 'retry' : 'processed')),
      notRun,
    );
    expect(out.map((o) => o.status)).toEqual(['processed', 'retry', 'not-run']);
  });
});

describe('prepare: what an envelope becomes', () => {
  it('is an invalid id when no usable id can be resolved', () => {
    const p = prepare(env('', { id: undefined }), {
      idOf: undefined,
      fingerprintOf: undefined,
    });
    expect(p.kind).toBe('invalid-id');
  });

  it('is a permanent failure under its id when fingerprintOf throws', () => {
    const boom = () => {
      throw new Error('boom');
    };
    const a = prepare(env('a'), { idOf: undefined, fingerprintOf: boom });
    expect(a.kind).toBe('unplaceable');
    if (a.kind !== 'unplaceable') return;
    expect(a.item.id).toBe('a');
    expect(PermanentError.is(a.error)).toBe(true);
    expect(a.error.message).toBe('fingerprintOf threw: boom');
  });

  it('carries the id after idOf and the fingerprint', () => {
    const p = prepare(env('a', { source: { broker: 't', queue: 'q', partition: 2, offset: '7' } }), {
      idOf: (e) => `k-${e.id}`,
      fingerprintOf: undefined,
    });
    expect(p.kind).toBe('item');
    if (p.kind !== 'item') return;
    expect(p.item.id).toBe('k-a');
    expect(p.item.fpHex).toMatch(/^[0-9a-f]{64}$/);
  });
});
