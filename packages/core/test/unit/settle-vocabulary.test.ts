import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// One vocabulary for a message's fate (issue #28 item 3): core maps an outcome to a settle plan
// (`settlePlanOf`), and broker adapters read only the plan: what to do (`kind`), the dead-letter
// record, recorded or not, spent or not, the failure, the `settled` event's fields. An adapter
// that reads an outcome's status makes a second mapping, which drifts from core's.
//
// `@once/http` answers requests, not deliveries: a duplicate is answered with the stored
// response, which no settle plan carries. It reads outcomes in one module, `answer.ts` (the one
// mapping from a key's outcome to its HTTP answer), and nowhere else.

const packages = fileURLToPath(new URL('../../../', import.meta.url));
const ADAPTERS = ['kafka', 'sqs', 'rabbitmq', 'nats', 'http'];
/** The one module outside core allowed to read an outcome's status, and why: see above. */
const ALLOWED = new Set(['http/src/answer.ts']);

/** Statuses only an `Outcome` has (an `UnclaimedOutcome` also has `failed` and `not-run`). */
const OUTCOME_ONLY = "'(?:processed|duplicate|conflict|retry|busy)'";
const ANY_OUTCOME = "'(?:processed|duplicate|conflict|retry|busy|failed|not-run)'";

/** The places in `source` that read an outcome's status, one short excerpt each. */
function outcomeStatusReads(source: string): string[] {
  const found: string[] = [];
  const add = (re: RegExp) => {
    for (const m of source.matchAll(re)) found.push(m[0]);
  };
  // A variable named for an outcome: `outcome.status`, `o?.status`, `outcomes[k]!.status`.
  add(/\b(?:\w*[oO]utcomes?\w*|o)(?:\[[^\]]*\])?!?\??\.status\b/g);
  // Any `.status` compared with an outcome's status.
  add(
    new RegExp(
      `\\.status\\s*[!=]==?\\s*${ANY_OUTCOME}|${ANY_OUTCOME}\\s*[!=]==?\\s*[\\w.?!\\]\\[]*\\.status\\b`,
      'g',
    ),
  );
  // A switch over a `.status` with a case only an Outcome has.
  for (const m of source.matchAll(/switch\s*\([^)]*\.status\)\s*\{/g)) {
    const body = source.slice(m.index, m.index + 2_000);
    const end = body.search(/\n\s{0,4}\}\n/);
    if (new RegExp(`case\\s+${OUTCOME_ONLY}`).test(end < 0 ? body : body.slice(0, end))) found.push(m[0]);
  }
  // Narrowing on an outcome's field names: `'spent' in o`, `'why' in outcome`.
  add(/'(?:spent|why|action|reason)'\s+in\s+\w*[oO]utcome\w*/g);
  return found;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => join(e.parentPath, e.name));
}

describe('adapters read settle plans, not outcomes', () => {
  for (const pkg of ADAPTERS) {
    it(`packages/${pkg}/src reads no outcome status`, () => {
      const files = tsFiles(join(packages, pkg, 'src'));
      expect(files.length).toBeGreaterThan(3);
      const offenders = files
        .map((f) => ({ file: relative(packages, f), reads: outcomeStatusReads(readFileSync(f, 'utf8')) }))
        .filter((x) => x.reads.length > 0 && !ALLOWED.has(x.file));
      expect(offenders).toEqual([]);
    });
  }

  it('http reads outcomes in answer.ts only, through one switch', () => {
    const answer = readFileSync(join(packages, 'http', 'src', 'answer.ts'), 'utf8');
    expect(outcomeStatusReads(answer)).toEqual(['outcome.status', 'switch (outcome.status) {']);
  });

  it('the guard finds the reads the adapters had before the plan carried their fields', () => {
    // Each line as it stood in an adapter before issue #28 item 3.
    const before = [
      "if (o?.status === 'retry') {",
      "if (outcome.status === 'retry') await ctx.counter.settled(outcome);",
      "const retries = outcomes.filter((o) => o.status === 'retry');",
      "if (plan.kind === 'dead-letter' && (outcome.status === 'failed' || outcome.status === 'conflict')) {",
      "events.emit('settled', { id: outcome.id, status: outcome.status, plan: plan.kind });",
      "if (outcome.status === 'processed' || outcome.status === 'duplicate') {",
      "switch (outcome.status) {\n      case 'processed':\n        return 1;\n    }\n",
      "switch (res.status) {\n  case 'busy':\n    return 1;\n}\n",
      "if (x.status !== 'not-run') return;",
      "if ('spent' in outcome) return;",
    ];
    for (const line of before) expect(outcomeStatusReads(line), line).not.toEqual([]);
  });

  it('leaves other statuses alone', () => {
    const fine = [
      "if (r.status !== 'fulfilled' || !r.value.duplicate) continue;",
      "events.emit('settled', { id: plan.id, status: plan.outcome, plan: plan.kind });",
      "return { status: 'processed', key, response: job.answered! };",
      "switch (ended.status) {\n    case 'committed':\n      return 1;\n    case 'not-run':\n      return 2;\n  }\n",
      'if (!isStorable(answered.status)) throw new Error();',
    ];
    for (const line of fine) expect(outcomeStatusReads(line), line).toEqual([]);
  });
});
