// @ts-check
// One example's demo run: prepare (publish with duplicates), start its consumers, SIGKILL them
// part-way, start them again, wait until every unique message had its effect and nothing is left
// pending, stop them gracefully, check the example's domain invariant, clean up. Every wait has a
// deadline that fails the row instead of hanging the demo.
import { ConsumerProcess } from './consumer-process.mjs';

/** @typedef {import('./example-contract.js').DemoExample} DemoExample */
/** @typedef {import('./example-contract.js').DemoPrepareArgs} DemoPrepareArgs */
/** @typedef {import('./example-contract.js').DemoPrepared} DemoPrepared */

/**
 * @typedef {object} DemoRow
 * @property {string} name
 * @property {string} broker
 * @property {number} sent
 * @property {number} unique
 * @property {number} seen deliveries the consumers reported settling (processed, duplicate, conflict, failed)
 * @property {number} dropped duplicates the consumers reported
 * @property {number} effects effect rows at the end
 * @property {boolean} effectsOk one effect per unique message id, and no more (at every stage)
 * @property {import('./example-contract.js').DemoStage[]} stages effects per stage of a chain, if the example reports them
 * @property {{ ok: boolean, detail: string }} domain
 * @property {number} killedAt effect rows when the first consumers were SIGKILLed
 * @property {number} seconds
 * @property {string[]} problems what went wrong, if anything
 */

/** Share of the unique messages with an effect before the consumers are SIGKILLed. */
const KILL_AT = 0.4;
const POLL_MS = 100;
/** Effects unchanged this long (with nothing pending) count as settled. */
const STABLE_MS = 1000;
const KILL_DEADLINE_MS = Number(process.env.DEMO_KILL_DEADLINE_MS ?? 60_000);
const SETTLE_DEADLINE_MS = Number(process.env.DEMO_SETTLE_DEADLINE_MS ?? 120_000);
const STOP_GRACE_MS = 15_000;
/** The outcomes that settle a delivery; `retry` and `busy` mean it comes back later. */
const SETTLED = ['processed', 'duplicate', 'conflict', 'failed'];

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

/**
 * @param {DemoExample} example
 * @param {DemoPrepareArgs} args
 * @param {(line: string) => void} log
 * @returns {Promise<DemoRow>}
 */
export async function runExample(example, args, log) {
  const t0 = Date.now();
  /** @type {DemoRow} */
  const row = {
    name: example.name,
    broker: example.broker,
    sent: 0,
    unique: 0,
    seen: 0,
    dropped: 0,
    effects: 0,
    effectsOk: false,
    stages: [],
    domain: { ok: false, detail: 'not checked' },
    killedAt: 0,
    seconds: 0,
    problems: [],
  };
  /** @type {ConsumerProcess[]} */
  const all = [];
  /** @type {DemoPrepared | undefined} */
  let prepared;
  try {
    prepared = await example.prepare(args);
    const p = prepared;
    row.sent = p.sent;
    row.unique = p.unique;
    log(`${example.name}: published ${p.sent} messages (${p.unique} unique) in ${since(t0)} s`);

    const start = (/** @type {number} */ round) => {
      const group = p.consumers.map(
        (spec, i) => new ConsumerProcess(spec, `${example.name} consumer ${i + 1}.${round}`),
      );
      all.push(...group);
      return group;
    };
    /** A consumer that exited by itself is a failure of the row, not something to wait out. */
    const died = (/** @type {ConsumerProcess[]} */ group) => {
      const dead = group.find((c) => c.exited);
      return dead && `a consumer exited by itself (code ${dead.code}, signal ${dead.signal})`;
    };

    const first = start(1);
    const killTarget = Math.ceil(p.unique * KILL_AT);
    const killBy = Date.now() + KILL_DEADLINE_MS;
    for (;;) {
      const e = await p.effects();
      if (e.total >= killTarget) break;
      const dead = died(first);
      if (dead) throw new Error(`${dead} before the kill`);
      if (Date.now() > killBy)
        throw new Error(`only ${e.total} of ${killTarget} effects after ${KILL_DEADLINE_MS / 1000} s`);
      await sleep(POLL_MS);
    }
    await Promise.all(first.map((c) => c.kill()));
    row.killedAt = (await p.effects()).total;
    log(`${example.name}: SIGKILLed ${first.length} consumer(s) at ${row.killedAt} effects; restarting`);

    const second = start(2);
    const settleBy = Date.now() + SETTLE_DEADLINE_MS;
    let last = -1;
    let stableSince = Date.now();
    for (;;) {
      const e = await p.effects();
      if (e.total !== last) {
        last = e.total;
        stableSince = Date.now();
      }
      if (e.unique >= p.unique && Date.now() - stableSince >= STABLE_MS && (await p.pending()) === 0) break;
      const dead = died(second);
      if (dead) throw new Error(`${dead} after the restart`);
      if (Date.now() > settleBy)
        throw new Error(
          `not settled after ${SETTLE_DEADLINE_MS / 1000} s: ${e.unique} of ${p.unique} unique effects, ` +
            `${await p.pending().catch(() => '?')} pending`,
        );
      await sleep(POLL_MS * 2);
    }
    const clean = await Promise.all(second.map((c) => c.stop(STOP_GRACE_MS)));
    if (!clean.every(Boolean)) row.problems.push('a consumer did not stop cleanly on SIGTERM');

    const e = await p.effects();
    row.sent = p.sent;
    row.effects = e.total;
    row.stages = p.stages ? await p.stages() : [];
    row.effectsOk = effectsHold(e, row.stages, p.unique);
    row.domain = await p.verify();
  } catch (err) {
    row.problems.push(err instanceof Error ? err.message : String(err));
    if (prepared)
      row.effects = await prepared.effects().then(
        (e) => e.total,
        () => row.effects,
      );
  } finally {
    await Promise.all(all.map((c) => c.stop(STOP_GRACE_MS)));
    if (prepared)
      await prepared.cleanup().catch((err) => row.problems.push(`cleanup failed: ${err.message}`));
  }
  if (process.env.DEMO_DEBUG)
    for (const c of all) log(`${example.name}: reported ${JSON.stringify(c.counts)}`);
  for (const c of all) {
    for (const status of SETTLED) row.seen += c.counts[status] ?? 0;
    row.dropped += c.counts.duplicate ?? 0;
  }
  row.seconds = (Date.now() - t0) / 1000;
  return row;
}

/**
 * One effect per unique message id and no more, in the example's effects and at every stage.
 * @param {import('./example-contract.js').DemoEffects} effects
 * @param {import('./example-contract.js').DemoStage[]} stages
 * @param {number} unique
 */
export function effectsHold(effects, stages, unique) {
  return [effects, ...stages].every((x) => x.total === unique && x.unique === unique);
}

const since = (/** @type {number} */ t) => ((Date.now() - t) / 1000).toFixed(1);
