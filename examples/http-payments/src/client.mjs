// @ts-check
// A client of POST /charges that behaves as the docs ask (docs/http.md): one Idempotency-Key per
// charge, kept across every retry of it; retry on a network error, a 5xx, or a 409 (after its
// Retry-After), until a final answer. To show what the server must survive, it also loses
// responses on purpose (aborts the request after a few ms, or drops an answer it got, and retries),
// sends some charges twice at once with one key (to both servers), and now and then re-uses a
// finished key with another amount (the server must answer 422 and charge nothing).
import { randomInt } from 'node:crypto';
import { TOKEN_LIST, TOKENS } from './accounts.mjs';

/**
 * @typedef {object} PlannedCharge
 * @property {number} index
 * @property {string} token the bearer token (it decides the account)
 * @property {string} account
 * @property {string} key the Idempotency-Key
 * @property {string} header the key as sent: a structured-field string (`"k"`) or a bare token (`k`)
 * @property {{ amountCents: number, currency: string, description: string }} body
 * @property {number} senders requests sent at once with this key (2: a concurrent duplicate)
 */

/**
 * @typedef {object} ClientStats
 * @property {number} requests every request sent, retries included
 * @property {number} lost responses the client lost on purpose (and retried)
 * @property {number} cut requests that failed on the wire (server SIGKILLed mid-request)
 * @property {number} refused connections refused (a server down or still starting)
 * @property {number} busy 409s: the key was in flight elsewhere
 * @property {number} replayed answers marked Idempotent-Replayed
 * @property {number} serverErrors 5xx answers
 * @property {number} mismatches finished keys re-used with another amount
 * @property {number} mismatch422 ... that got their 422
 */

/** The account, key and amount of each unique charge; about `dupShare` of them are sent twice at once. */
export function planCharges(
  /** @type {{ run: string, count: number, dupShare: number }} */ { run, count, dupShare },
) {
  /** @type {PlannedCharge[]} */
  const plan = [];
  for (let i = 0; i < count; i++) {
    const token = /** @type {keyof typeof TOKENS} */ (TOKEN_LIST[i % TOKEN_LIST.length]);
    // Every tenth charge re-uses the previous charge's key under another account: scoped by the
    // account, it is a charge of its own.
    const key = i % 10 === 9 ? /** @type {PlannedCharge} */ (plan[i - 1]).key : `${run}-charge-${i}`;
    plan.push({
      index: i,
      token,
      account: TOKENS[token],
      key,
      header: i % 2 === 0 ? `"${key}"` : key,
      body: { amountCents: 100 + (i % 9_900), currency: 'eur', description: `order ${i}` },
      senders: Math.random() < dupShare ? 2 : 1,
    });
  }
  return plan;
}

/** The final answers' identity: one per (account, key). */
export const idOf = (/** @type {{ account: string, key: string }} */ c) => `${c.account} ${c.key}`;

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));
/** Statuses a client retries (the server stores none of them). */
const RETRY = new Set([408, 409, 425, 429]);

export class ChargeClient {
  /** @type {ClientStats} */
  stats = {
    requests: 0,
    lost: 0,
    cut: 0,
    refused: 0,
    busy: 0,
    replayed: 0,
    serverErrors: 0,
    mismatches: 0,
    mismatch422: 0,
  };
  /** @type {Map<string, { status: number, body: string }>} (account, key) → the answer every sender got */
  finals = new Map();
  /** @type {string[]} what went wrong (answers that differ for one key, a missing 422) */
  problems = [];
  #stopped = false;
  #urls;
  #concurrency;
  #lostShare;
  #mismatchEvery;

  /**
   * @param {object} o
   * @param {string[]} o.urls the servers (`http://127.0.0.1:port`); each retry goes to the next
   * @param {number} [o.concurrency] charges in flight at once (default 16)
   * @param {number} [o.lostShare] share of first requests whose response is lost (default 0.1)
   * @param {number} [o.mismatchEvery] re-use every n-th finished key with another amount (default 50)
   */
  constructor({ urls, concurrency = 16, lostShare = 0.1, mismatchEvery = 50 }) {
    this.#urls = urls;
    this.#concurrency = concurrency;
    this.#lostShare = lostShare;
    this.#mismatchEvery = mismatchEvery;
  }

  /**
   * Sends every planned charge, `concurrency` at a time; resolves when each has its final answer.
   * @param {PlannedCharge[]} plan
   */
  async run(plan) {
    await this.#ready();
    let next = 0;
    await Promise.all(
      Array.from({ length: this.#concurrency }, async () => {
        while (next < plan.length && !this.#stopped)
          await this.#charge(/** @type {PlannedCharge} */ (plan[next++]));
      }),
    );
  }

  /** Waits until a server answers (any answer): the processes start after the client does. */
  async #ready() {
    for (let i = 0; !this.#stopped; i++) {
      const ok = await fetch(`${this.#urls[i % this.#urls.length]}/charges`).then(
        () => true,
        () => false,
      );
      if (ok) return;
      await sleep(100);
    }
  }

  /** Makes every request still retrying give up (the demo's cleanup after a failure). */
  stop() {
    this.#stopped = true;
  }

  /** @param {PlannedCharge} c */
  async #charge(c) {
    const body = JSON.stringify(c.body);
    const answers = await Promise.all(
      Array.from({ length: c.senders }, (_, s) =>
        this.#untilFinal(c, body, c.index + s, Math.random() < this.#lostShare),
      ),
    );
    const first = /** @type {{ status: number, body: string }} */ (answers[0]);
    if (answers.some((a) => a.status !== first.status || a.body !== first.body))
      this.problems.push(`${idOf(c)}: concurrent requests got different answers`);
    if (first.status !== 201) this.problems.push(`${idOf(c)}: answered ${first.status}: ${first.body}`);
    this.finals.set(idOf(c), first);
    if (c.index % this.#mismatchEvery === 0) {
      this.stats.mismatches++;
      const other = JSON.stringify({ ...c.body, amountCents: c.body.amountCents + 1 });
      const a = await this.#untilFinal(c, other, c.index, false);
      if (a.status === 422) this.stats.mismatch422++;
      else this.problems.push(`${idOf(c)}: the key with another amount got ${a.status}, not 422`);
    }
  }

  /**
   * Sends one request until it has a final answer, retrying with the same key.
   * @param {PlannedCharge} c
   * @param {string} body
   * @param {number} start which server to try first
   * @param {boolean} loseFirst lose the first response
   * @returns {Promise<{ status: number, body: string }>}
   */
  async #untilFinal(c, body, start, loseFirst) {
    for (let attempt = 0; ; attempt++) {
      if (this.#stopped) throw new Error('the client was stopped');
      const url = `${this.#urls[(start + attempt) % this.#urls.length]}/charges`;
      const lose = loseFirst && attempt === 0;
      const abort = new AbortController();
      const timer = lose ? setTimeout(() => abort.abort(), randomInt(0, 20)) : undefined;
      this.stats.requests++;
      try {
        const res = await fetch(url, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${c.token}`,
            'idempotency-key': c.header,
            'content-type': 'application/json',
          },
          body,
          signal: abort.signal,
        });
        const text = await res.text();
        clearTimeout(timer);
        if (lose) {
          this.stats.lost++; // it arrived, and the client lost it anyway
          continue;
        }
        if (res.headers.get('idempotent-replayed')) this.stats.replayed++;
        if (res.status === 409 || RETRY.has(res.status) || res.status === 503) {
          if (res.status === 409) this.stats.busy++;
          const after = Number(res.headers.get('retry-after') ?? 1);
          await sleep(Math.min(Number.isFinite(after) ? after : 1, 2) * 1000);
          continue;
        }
        if (res.status >= 500) {
          this.stats.serverErrors++;
          await sleep(100);
          continue;
        }
        return { status: res.status, body: text };
      } catch (err) {
        clearTimeout(timer);
        if (lose) this.stats.lost++;
        else if (codeOf(err) === 'ECONNREFUSED') this.stats.refused++;
        else this.stats.cut++;
        await sleep(lose ? 0 : 50 + randomInt(0, 100));
      }
    }
  }
}

/** The system error code under a fetch failure (`TypeError: fetch failed` with a cause). */
function codeOf(/** @type {unknown} */ err) {
  const cause = /** @type {{ cause?: { code?: string } }} */ (err).cause;
  return cause?.code;
}
