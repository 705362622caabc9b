import type { Envelope, Outcome } from '@once/core';
import { Gate, silentLogger, TypedEmitter } from '@once/core/adapter';
import type { KafkaMessage } from 'kafkajs';
import { describe, expect, it } from 'vitest';
import { isKafkajsOwnershipLost } from '../../src/client/kafkajs.js';
import type { PartitionBatch } from '../../src/client/types.js';
import type { KafkaConsumerEventMap } from '../../src/events.js';
import { type KafkaConsumerOptions, resolveKafkaConsumerOptions } from '../../src/options.js';
import { newPartitionState } from '../../src/partition-state.js';
import { decodeMarker, encodeMarker } from '../../src/replay-marker.js';
import { type InboxLike, type PartitionBatchDeps, runPartitionBatch } from '../../src/run-partition-batch.js';

const kafka = { consumer: () => ({}), producer: () => ({}), admin: () => ({}) } as never;

function messages(from: number, n: number): KafkaMessage[] {
  return Array.from({ length: n }, (_, k) => ({
    key: null,
    value: Buffer.from(`v${from + k}`),
    headers: { 'message-id': `id-${from + k}` },
    offset: String(from + k),
    timestamp: '0',
    attributes: 0,
  })) as KafkaMessage[];
}

type Decide = (e: Envelope) => Outcome['status'];

/** A fake of our own InboxLike that records the calls; Kafka calls are recorded on the payload. */
function harness(
  opts: {
    decide?: Decide;
    metadata?: string | null;
    options?: Partial<KafkaConsumerOptions>;
    lease?: boolean;
    /** Runs inside the fake inbox for each envelope, before its outcome (e.g. core's lease clock). */
    during?: (e: Envelope) => Promise<void>;
    heartbeat?: () => Promise<void>;
    /** Starts already counted in Postgres, by message id. */
    starts?: Record<string, number>;
    /** The `inflight` row of partition t/0 (no commit metadata): its end, or a read that fails. */
    inflight?: string | null | Error;
    /** `noteInflight` rejects with this. */
    noteFails?: Error;
    /**
     * The consumer's database hold (core's lifecycle, `holdIfUnavailable`), as a fake: true for
     * the errors it holds for, after which the consumer no longer fetches. Holds for nothing by
     * default.
     */
    holdsFor?: (err: unknown) => boolean;
  } = {},
) {
  const log: string[] = [];
  const decide = opts.decide ?? (() => 'processed');
  const outcome = (e: Envelope): Outcome => {
    const status = decide(e);
    const base = { id: e.id ?? 'x', envelope: e };
    if (status === 'retry')
      return { ...base, status, error: { name: 'E', message: 'boom' }, delayMs: 7, spent: true };
    if (status === 'failed')
      return { ...base, status, reason: 'permanent', error: { name: 'E', message: 'bad' } };
    if (status === 'not-run')
      return { ...base, status, why: 'unavailable', error: { name: 'E', message: 'db away' }, delayMs: 7 };
    return { ...base, status: status as 'processed', result: undefined };
  };
  const doomed: string[] = [];
  const starts = new Map(Object.entries(opts.starts ?? {}));
  // The killer budget as core's engine keeps it (ProcessOptions.starts), over a fake start count:
  // a suspect's start is counted before its handler, and refused past maxAttempts (2).
  const maxAttempts = 2;
  let inflight = opts.inflight ?? null;
  const inbox: InboxLike = {
    options: { consumer: 'c', recordFailed: true },
    async noteInflight(stream, partition, end) {
      log.push(`note ${stream}/${partition} ${end}`);
      if (opts.noteFails) throw opts.noteFails;
      inflight = end;
    },
    async inflightEnd(stream, partition) {
      log.push(`read ${stream}/${partition}`);
      if (inflight instanceof Error) throw inflight;
      return inflight;
    },
    async process(e, call) {
      log.push(`process ${e.source.offset} attempt=${e.attempt} redelivered=${e.redelivered}`);
      const n = call?.starts?.suspect ? (starts.get(e.id!) ?? 0) + 1 : undefined;
      if (n !== undefined) {
        starts.set(e.id!, n);
        log.push(`start ${e.source.offset} #${n}`);
      }
      if (n !== undefined && n > maxAttempts) {
        doomed.push(`${e.source.offset}:${n}`);
        return {
          status: 'failed',
          id: e.id,
          envelope: e,
          reason: 'max-attempts',
          error: { name: 'AttemptsExhaustedError', message: 'x', code: 'ATTEMPTS_EXHAUSTED' },
        };
      }
      await opts.during?.(e);
      return outcome(e);
    },
    async processBatch(es) {
      log.push(`batch ${es.map((e) => e.source.offset + (e.attempt > 1 ? `@${e.attempt}` : '')).join(',')}`);
      const out: Outcome[] = [];
      let stopped = false;
      for (const e of es) {
        const o: Outcome = stopped
          ? {
              status: 'not-run',
              id: e.id,
              envelope: e,
              why: 'behind',
              error: { name: 'E', message: 'not run' },
              delayMs: 7,
            }
          : outcome(e);
        if (o.status === 'retry') stopped = true;
        out.push(o);
      }
      return out;
    },
    notRun(es) {
      log.push(`not-run ${es.map((e) => e.source.offset).join(',')}`);
      return es.map((e) => ({
        status: 'not-run',
        id: e.id,
        envelope: e,
        why: 'behind',
        error: { name: 'E', message: 'not run' },
        delayMs: 0,
      }));
    },
  };
  const state = newPartitionState();
  let fetching = true;
  const deps: PartitionBatchDeps = {
    options: resolveKafkaConsumerOptions({
      kafka,
      groupId: 'g',
      topics: ['t'],
      pool: {} as never,
      handler: () => {},
      batchSize: 3,
      ...opts.options,
    } as KafkaConsumerOptions).kafka,
    inbox,
    retryDelayMs: () => 11,
    ...(opts.lease === undefined ? {} : { lease: opts.lease }),
    logger: silentLogger,
    events: new TypedEmitter<KafkaConsumerEventMap>(silentLogger),
    state: () => state,
    generation: () => 1,
    owns: () => true,
    isStopping: () => false,
    isFetching: () => fetching,
    holdForDatabase: (err) => {
      if (!opts.holdsFor?.(err)) return false;
      log.push('hold');
      fetching = false;
      return true;
    },
    committedMetadata: async () => opts.metadata ?? null,
    deadLetter: async (_t, _p, m) => {
      log.push(`dlq ${m.offset}`);
    },
    retryLater: (_t, _p, offset, delayMs) => {
      log.push(`retryLater ${offset} ${delayMs}`);
    },
    gate: new Gate(),
    starts: { fresh: undefined, suspect: { starts: { suspect: true } } },
    isOwnershipLost: isKafkajsOwnershipLost,
  };
  const payloadOf = (msgs: KafkaMessage[]): PartitionBatch => ({
    topic: 't',
    partition: 0,
    messages: msgs,
    lastOffset: () => msgs[msgs.length - 1]!.offset,
    resolveOffset: (o: string) => log.push(`resolve ${o}`),
    heartbeat: opts.heartbeat ?? (async () => {}),
    commit: async (offset: string, metadata: string | null) => {
      const m = decodeMarker(metadata);
      log.push(`commit ${offset}${m ? ` ${JSON.stringify(m)}` : ''}`);
    },
    isRunning: () => true,
    isStale: () => false,
  });
  return {
    log,
    deps,
    state,
    doomed,
    /** The hold ends: the consumer fetches again. */
    resume: () => {
      fetching = true;
    },
    run: (msgs: KafkaMessage[]) => runPartitionBatch(deps, payloadOf(msgs)),
  };
}

/** Retries each of `offsets` on its first attempt; everything else is processed. */
const retryFirst =
  (...offsets: string[]): Decide =>
  (e) =>
    offsets.some((o) => o === e.source.offset) && e.attempt === 1 ? 'retry' : 'processed';
/** Fails `offset` for good after `retries` retries; everything else is processed. */
const failAt =
  (offset: string, retries = 0): Decide =>
  (e) =>
    e.source.offset !== offset ? 'processed' : e.attempt <= retries ? 'retry' : 'failed';

/** By test name: a fresh harness runs `slice` (`n` messages from offset `from`) and logs exactly `log`. */
type LogCase = { setup?: Parameters<typeof harness>[0]; slice: [number, number]; log: string[] };

const logCases: Record<string, LogCase> = {
  'marks each slice, runs it in one transaction, resolves and commits after': {
    slice: [10, 5],
    log: [
      'commit 10 {"end":"12"}',
      'batch 10,11,12',
      'resolve 12',
      'commit 13 {"end":"14"}',
      'batch 13,14',
      'resolve 14',
      'commit 15',
    ],
  },
  'waits out a short retry delay in place and runs the message again': {
    setup: { decide: retryFirst('11') },
    slice: [10, 3],
    log: [
      'commit 10 {"end":"12"}',
      'batch 10,11,12',
      'resolve 10',
      'commit 11',
      'commit 11 {"end":"12"}',
      'batch 11@2,12',
      'resolve 12',
      'commit 13',
    ],
  },
  'dead-letters failed messages before moving past them': {
    setup: { decide: failAt('1'), options: { crashReplay: false } },
    slice: [0, 3],
    log: ['batch 0,1,2', 'dlq 1', 'resolve 2', 'commit 3'],
  },
  'runs the messages a dead consumer had in flight one by one, counting starts': {
    setup: { metadata: encodeMarker({ end: '6' }) },
    slice: [5, 3],
    log: [
      'commit 5 {"end":"6"}',
      'process 5 attempt=1 redelivered=true',
      'start 5 #1',
      'resolve 5',
      'commit 6 {"end":"6"}',
      'process 6 attempt=1 redelivered=true',
      'start 6 #1',
      'resolve 6',
      'commit 7 {"end":"7"}',
      'process 7 attempt=1 redelivered=false',
      'resolve 7',
      'commit 8',
    ],
  },
  'message mode: one transaction per message': {
    setup: { options: { batch: false, crashReplay: false } },
    slice: [0, 2],
    log: [
      'process 0 attempt=1 redelivered=false',
      'process 1 attempt=1 redelivered=false',
      'resolve 1',
      'commit 2',
    ],
  },
  'message mode: the messages behind a retry that pauses the partition are reported not run, and read again after it':
    {
      setup: { options: { batch: false, crashReplay: false, inlineRetryMaxMs: 0 }, decide: retryFirst('1') },
      slice: [0, 4],
      log: [
        'process 0 attempt=1 redelivered=false',
        'process 1 attempt=1 redelivered=false',
        'resolve 0',
        'commit 1',
        'not-run 2',
        'retryLater 1 7',
      ],
    },
  'message mode: a message that fails every time in place is dead-lettered after its attempts, then the slice goes on':
    {
      setup: { options: { batch: false, crashReplay: false }, decide: failAt('1', 2) },
      slice: [0, 3],
      log: [
        'process 0 attempt=1 redelivered=false',
        'process 1 attempt=1 redelivered=false',
        'resolve 0',
        'commit 1',
        'process 1 attempt=2 redelivered=true',
        'commit 1',
        'process 1 attempt=3 redelivered=true',
        'process 2 attempt=1 redelivered=false',
        'dlq 1',
        'resolve 2',
        'commit 3',
      ],
    },
};

describe('runPartitionBatch', () => {
  it.each(Object.entries(logCases))('%s', async (_name, { setup, slice, log }) => {
    const h = harness(setup);
    await h.run(messages(...slice));
    expect(h.log).toEqual(log);
  });

  it('message mode: a retry waited out in place runs that message again and goes on with the slice, nothing else run or reported twice', async () => {
    const h = harness({ options: { batch: false }, decide: retryFirst('1', '2') });
    await h.run(messages(0, 4));
    expect(h.log).toEqual([
      'commit 0 {"end":"2"}',
      'process 0 attempt=1 redelivered=false',
      'process 1 attempt=1 redelivered=false',
      'resolve 0',
      // The progress commit before the wait keeps the marker: the slice is still in flight.
      'commit 1 {"end":"2"}',
      'process 1 attempt=2 redelivered=true',
      'process 2 attempt=1 redelivered=false',
      'resolve 1',
      'commit 2 {"end":"2"}',
      'process 2 attempt=2 redelivered=true',
      'resolve 2',
      'commit 3 {"end":"3"}',
      'process 3 attempt=1 redelivered=false',
      'resolve 3',
      'commit 4',
    ]);
    expect(h.state.retry).toBeUndefined();
  });

  it('settles only the prefix before a retry, then pauses and seeks back to it', async () => {
    const h = harness({ decide: retryFirst('11'), options: { inlineRetryMaxMs: 0 } });
    await h.run(messages(10, 3));
    expect(h.log).toEqual([
      'commit 10 {"end":"12"}',
      'batch 10,11,12',
      'resolve 10',
      'commit 11',
      'retryLater 11 7',
    ]);
    expect(h.state.retry).toEqual({ offset: '11', attempt: 1 });
    // The retried message runs again as attempt 2 (core runs it alone), and the retry is forgotten.
    h.log.length = 0;
    await h.run(messages(11, 2));
    expect(h.log).toContain('batch 11@2,12');
    expect(h.state.retry).toBeUndefined();
  });

  it('a message whose database is away (not-run, unavailable) is never waited for in place: the partition pauses from it, unspent; the others of the slice ran', async () => {
    // Over several databases: 10 and 12 belong to usable databases, 11 to one that is away.
    const h = harness({ decide: (e) => (e.source.offset === '11' ? 'not-run' : 'processed') });
    await h.run(messages(10, 3));
    expect(h.log).toEqual([
      'commit 10 {"end":"12"}',
      'batch 10,11,12',
      'resolve 10',
      // The committed offset stops at the held message; the marker is cleared (nothing runs meanwhile).
      'commit 11',
      'retryLater 11 7',
    ]);
    // Read again as the same attempt.
    expect(h.state.retry).toEqual({ offset: '11', attempt: 0 });
    h.log.length = 0;
    await h.run(messages(11, 2));
    expect(h.log).toContain('batch 11,12');
  });

  it('refuses to start a message that killed the consumer maxAttempts times', async () => {
    const h = harness({ metadata: encodeMarker({ end: '9' }), starts: { 'id-5': 2 } });
    await h.run(messages(5, 1));
    expect(h.doomed).toEqual(['5:3']);
    expect(h.log.slice(1, 4)).toEqual(['process 5 attempt=1 redelivered=true', 'start 5 #3', 'dlq 5']);
  });

  it('a replayed message runs alone in the consumer: a fresh slice of another partition waits for it', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => {
      release = r;
    });
    const replaying = harness({ metadata: encodeMarker({ end: '5' }), during: () => held });
    const fresh = harness({ options: { crashReplay: false } });
    fresh.deps.gate = replaying.deps.gate; // one gate per consumer, shared by its partitions
    const alone = replaying.run(messages(5, 1));
    await new Promise((r) => setTimeout(r, 10));
    const beside = fresh.run(messages(0, 2));
    await new Promise((r) => setTimeout(r, 10));
    expect(fresh.log).toEqual([]); // waiting for the gate
    release();
    await Promise.all([alone, beside]);
    expect(fresh.log).toEqual(['batch 0,1', 'resolve 1', 'commit 2']);
  });

  describe('lease mode: one clock', () => {
    const leaseOptions = { batch: false, crashReplay: false, heartbeatIntervalMs: 20_000 } as const;

    it("each extend() of core's lease clock is a heartbeat of the message's batch", async () => {
      const beats: string[] = [];
      const h = harness({
        lease: true,
        options: leaseOptions,
        heartbeat: async () => {
          beats.push('beat');
        },
        // What core's LeaseClock does: extend at the claim and at each renewal, without awaiting.
        during: async (e) => {
          expect(e.liveness).toBeDefined();
          for (let k = 0; k < 3; k++) await e.liveness!.extend(30_000);
        },
      });
      await h.run(messages(0, 2));
      expect(beats).toHaveLength(6);
      expect(h.log).toEqual([
        'process 0 attempt=1 redelivered=false',
        'process 1 attempt=1 redelivered=false',
        'resolve 1',
        'commit 2',
      ]);
    });

    it('a heartbeat that finds the generation over ends the batch and hands the error to kafkajs', async () => {
      const lost = Object.assign(new Error('rebalance'), { type: 'REBALANCE_IN_PROGRESS' });
      const h = harness({
        lease: true,
        options: leaseOptions,
        heartbeat: async () => {
          throw lost;
        },
        during: async (e) => {
          await e.liveness!.extend(30_000); // never rejects: core only logs rejections anyway
        },
      });
      await expect(h.run(messages(0, 2))).rejects.toBe(lost);
      // The first message ran; the second is not started and nothing is committed once the
      // generation is over (resolveOffset is kafkajs-local; the rejoin discards it).
      expect(h.log).toEqual(['process 0 attempt=1 redelivered=false', 'resolve 0']);
    });

    it('transactional mode sets no liveness', async () => {
      let seen: unknown = 'unset';
      const h = harness({
        options: leaseOptions,
        during: async (e) => {
          seen = e.liveness;
        },
      });
      await h.run(messages(0, 1));
      expect(seen).toBeUndefined();
    });
  });
});

describe('a client without offset-commit metadata (capabilities.commitMetadata false): the marker is a PostgreSQL row', () => {
  /** A harness on a client without commit metadata; `errors` collects the `error` events' tags. */
  function plain(setup: Parameters<typeof harness>[0] = {}) {
    const h = harness(setup);
    h.deps.commitMetadata = false;
    let generation = 1;
    h.deps.generation = () => generation;
    const errors: string[] = [];
    const replays: string[] = [];
    h.deps.events.on('error', (e) => errors.push(e.where));
    h.deps.events.on('partition:replay', (e) => replays.push(`${e.fromOffset}..${e.toOffset}`));
    return { ...h, errors, replays, rejoin: () => (generation += 1) };
  }

  it('no row (a fresh group): plain slices, each noted in PostgreSQL after the progress commit, nothing alone', async () => {
    const h = plain();
    await h.run(messages(5, 5));
    expect(h.log).toEqual([
      'read t/0',
      // The slice's first offset first (a member whose generation is over is refused here), then
      // the range: a crash leaves exactly [committed .. noted end].
      'commit 5',
      'note t/0 7',
      'batch 5,6,7',
      'resolve 7',
      'commit 8',
      'note t/0 9',
      'batch 8,9',
      'resolve 9',
      'commit 10',
    ]);
    expect(h.replays).toEqual([]);
    // The row is read once per assignment: the next batch of the same one only notes its slices.
    h.log.length = 0;
    await h.run(messages(10, 2));
    expect(h.log).toEqual(['commit 10', 'note t/0 11', 'batch 10,11', 'resolve 11', 'commit 12']);
  });

  it('a row whose end is at or past the first offset: that range runs alone, starts counted, then slices', async () => {
    const h = plain({ inflight: '6' });
    await h.run(messages(5, 5));
    expect(h.log).toEqual([
      'read t/0',
      'commit 5',
      'process 5 attempt=1 redelivered=true',
      'start 5 #1',
      'resolve 5',
      'commit 6',
      'process 6 attempt=1 redelivered=true',
      'start 6 #1',
      'resolve 6',
      'commit 7',
      'note t/0 9',
      'batch 7,8,9',
      'resolve 9',
      'commit 10',
    ]);
    expect(h.replays).toEqual(['5..6']);
  });

  it('a row whose end is exactly the first offset replays that one message only', async () => {
    const h = plain({ inflight: '5' });
    await h.run(messages(5, 3));
    expect(h.log.filter((l) => l.startsWith('start') || l.startsWith('batch'))).toEqual([
      'start 5 #1',
      'batch 6,7',
    ]);
  });

  it('a row below the first offset (a clean handover: the last slice was committed) replays nothing', async () => {
    const h = plain({ inflight: '4' });
    await h.run(messages(5, 2));
    expect(h.log).toEqual(['read t/0', 'commit 5', 'note t/0 6', 'batch 5,6', 'resolve 6', 'commit 7']);
    expect(h.replays).toEqual([]);
  });

  it('a message that killed the consumer at every start is refused once past maxAttempts, its neighbours run', async () => {
    // Two deaths on offset 6 before: the row still says 7, the committed offset is 5.
    const h = plain({ inflight: '7', starts: { 'id-6': 2 } });
    await h.run(messages(5, 4));
    expect(h.doomed).toEqual(['6:3']);
    expect(h.log.filter((l) => /^(start|dlq|process 8)/.test(l))).toEqual([
      'start 5 #1',
      'start 6 #3',
      'dlq 6',
      'start 7 #1',
      'process 8 attempt=1 redelivered=false',
    ]);
  });

  /** What the database hold is asked about; `down` is the error it holds for. */
  const down = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  const holdsForDown = (err: unknown) => err === down;

  it('noteInflight failing for another reason than the database hold: nothing of that slice runs, the partition backs off from its first offset', async () => {
    const h = plain({ noteFails: new Error('not a database fault'), holdsFor: holdsForDown });
    await h.run(messages(5, 3));
    expect(h.log).toEqual(['read t/0', 'commit 5', 'note t/0 7', 'retryLater 5 11']);
    expect(h.errors).toEqual(['note-replay-marker']);
    expect(h.state.replay).toBeUndefined();
    expect(h.state.faults).toBe(1);
  });

  it('noteInflight failing because the database cannot be used: the consumer holds, nothing of the slice runs, it is read again after the hold with no backoff and no attempt counted', async () => {
    const h = plain({ noteFails: down, holdsFor: holdsForDown });
    await h.run(messages(5, 3));
    // retryLater without a delay: the partition waits for the resume after the hold, not a timer.
    expect(h.log).toEqual(['read t/0', 'commit 5', 'note t/0 7', 'hold', 'retryLater 5 undefined']);
    // The hold reports itself (consumer:paused); no error event, no fault, no retry state.
    expect(h.errors).toEqual([]);
    expect(h.state.faults).toBe(0);
    expect(h.state.retry).toBeUndefined();
    expect(h.state.replay).toBeUndefined();
    // The database is back: the slice is noted and runs, as its first attempt.
    h.resume();
    h.log.length = 0;
    h.deps.inbox.noteInflight = async () => void h.log.push('note t/0 7');
    await h.run(messages(5, 3));
    expect(h.log).toEqual(['commit 5', 'note t/0 7', 'batch 5,6,7', 'resolve 7', 'commit 8']);
  });

  it('noteInflight failing for the database after a slice ran: its progress is committed, the next slice waits for the hold', async () => {
    const h = plain({ holdsFor: holdsForDown });
    const note = h.deps.inbox.noteInflight.bind(h.deps.inbox);
    let calls = 0;
    h.deps.inbox.noteInflight = async (...a) => {
      calls += 1;
      if (calls === 2) {
        h.log.push(`note ${a[0]}/${a[1]} ${a[2]} (fails)`);
        throw down;
      }
      return note(...a);
    };
    await h.run(messages(5, 6));
    expect(h.log).toEqual([
      'read t/0',
      'commit 5',
      'note t/0 7',
      'batch 5,6,7',
      'resolve 7',
      'commit 8',
      'note t/0 10 (fails)',
      'hold',
      'retryLater 8 undefined',
    ]);
    expect(h.errors).toEqual([]);
    expect(h.state.faults).toBe(0);
  });

  it('noteInflight failing after a slice ran: its progress is committed, the next slice does not run', async () => {
    const h = plain({ holdsFor: holdsForDown });
    const note = h.deps.inbox.noteInflight.bind(h.deps.inbox);
    let calls = 0;
    h.deps.inbox.noteInflight = async (...a) => {
      calls += 1;
      if (calls === 2) {
        h.log.push(`note ${a[0]}/${a[1]} ${a[2]} (fails)`);
        throw new Error('deadlock detected');
      }
      return note(...a);
    };
    await h.run(messages(5, 6));
    expect(h.log).toEqual([
      'read t/0',
      'commit 5',
      'note t/0 7',
      'batch 5,6,7',
      'resolve 7',
      'commit 8',
      'note t/0 10 (fails)',
      'retryLater 8 11',
    ]);
  });

  it('a read that fails: be safe, the first slice (batchSize messages) runs alone, the rest as slices', async () => {
    const h = plain({ inflight: new Error('the database is unreachable') });
    await h.run(messages(5, 5));
    expect(h.log).toEqual([
      'read t/0',
      'commit 5',
      'process 5 attempt=1 redelivered=true',
      'start 5 #1',
      'resolve 5',
      'commit 6',
      'process 6 attempt=1 redelivered=true',
      'start 6 #1',
      'resolve 6',
      'commit 7',
      'process 7 attempt=1 redelivered=true',
      'start 7 #1',
      'resolve 7',
      'commit 8',
      'note t/0 9',
      'batch 8,9',
      'resolve 9',
      'commit 10',
    ]);
    expect(h.errors).toEqual(['read-replay-marker']);
  });

  it('a new assignment reads the row again: what this member noted before a rebalance replays alone if still ahead', async () => {
    const h = plain();
    await h.run(messages(5, 3));
    expect(h.log.at(-1)).toBe('commit 8');
    // The row says 7, below the next offset: the handover was clean.
    h.rejoin();
    h.log.length = 0;
    await h.run(messages(8, 1));
    expect(h.log).toEqual([
      'read t/0',
      'commit 8',
      'note t/0 8',
      'process 8 attempt=1 redelivered=false',
      'resolve 8',
      'commit 9',
    ]);
    // A member that died inside its slice: the partition comes back from the committed offset.
    h.rejoin();
    h.log.length = 0;
    await h.run(messages(8, 2));
    expect(h.log.slice(0, 3)).toEqual(['read t/0', 'commit 8', 'process 8 attempt=1 redelivered=true']);
    expect(h.replays).toEqual(['8..8']);
  });

  it('message mode and lease mode note each slice the same way and replay alone the same way', async () => {
    for (const lease of [false, true]) {
      const h = plain({ options: { batch: false }, lease, inflight: '5' });
      await h.run(messages(5, 3));
      expect(h.log, `lease ${lease}`).toEqual([
        'read t/0',
        'commit 5',
        'process 5 attempt=1 redelivered=true',
        'start 5 #1',
        'resolve 5',
        'commit 6',
        'note t/0 7',
        'process 6 attempt=1 redelivered=false',
        'process 7 attempt=1 redelivered=false',
        'resolve 7',
        'commit 8',
      ]);
    }
  });

  it('a member whose generation is over is refused at the commit before a slice: it notes nothing and runs nothing', async () => {
    const lost = Object.assign(new Error('rebalance'), { type: 'REBALANCE_IN_PROGRESS' });
    const h = plain();
    const payload = {
      topic: 't',
      partition: 0,
      messages: messages(5, 2),
      lastOffset: () => '6',
      resolveOffset: () => {},
      heartbeat: async () => {},
      commit: async () => {
        h.log.push('commit refused');
        throw lost;
      },
      isRunning: () => true,
      isStale: () => false,
    };
    await expect(runPartitionBatch(h.deps, payload)).rejects.toBe(lost);
    expect(h.log).toEqual(['read t/0', 'commit refused']);
  });

  it('crash replay off: no row is read or noted, nothing committed before a slice', async () => {
    const h = plain({ options: { batchSize: 2, crashReplay: false }, inflight: '100' });
    await h.run(messages(5, 4));
    expect(h.log).toEqual(['batch 5,6', 'resolve 6', 'batch 7,8', 'resolve 8', 'commit 9']);
  });

  it('with commit metadata (kafkajs) the row is neither read nor noted, even when one exists', async () => {
    const h = harness({ inflight: '100' });
    await h.run(messages(5, 2));
    expect(h.log).toEqual(['commit 5 {"end":"6"}', 'batch 5,6', 'resolve 6', 'commit 7']);
  });
});
