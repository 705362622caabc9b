// @ts-check
// The demo's closing table: one block per broker, one row per example, then the domain checks and
// anything that went wrong.

/** @typedef {import('./run-example.mjs').DemoRow} DemoRow */

/** @param {DemoRow} r */
export const rowHolds = (r) => r.effectsOk && r.domain.ok && r.problems.length === 0;

const COLUMNS = /** @type {const} */ ([
  ['example', 16, (/** @type {DemoRow} */ r) => r.name],
  ['sent', 6, (/** @type {DemoRow} */ r) => r.sent],
  ['unique', 7, (/** @type {DemoRow} */ r) => r.unique],
  ['deliveries seen*', 17, (/** @type {DemoRow} */ r) => r.seen],
  ['duplicates dropped*', 20, (/** @type {DemoRow} */ r) => r.dropped],
  ['killed at', 10, (/** @type {DemoRow} */ r) => r.killedAt],
  ['effects', 8, (/** @type {DemoRow} */ r) => r.effects],
  ['effects = unique', 17, (/** @type {DemoRow} */ r) => (r.effectsOk ? 'yes' : 'NO')],
  ['domain check', 13, (/** @type {DemoRow} */ r) => (r.domain.ok ? 'yes' : 'NO')],
  ['time', 8, (/** @type {DemoRow} */ r) => `${r.seconds.toFixed(1)} s`],
]);

/** @param {(string | number)[]} cells */
const line = (cells) =>
  cells
    .map((c, i) =>
      i === 0 ? String(c).padEnd(COLUMNS[i]?.[1] ?? 0) : String(c).padStart(COLUMNS[i]?.[1] ?? 0),
    )
    .join(' ');

/**
 * @param {DemoRow[]} rows
 * @param {{ count: number, dupShare: number }} settings
 * @returns {string}
 */
export function report(rows, { count, dupShare }) {
  const out = [
    '',
    `once demo: ${count} unique messages per example, about ${Math.round(dupShare * 100)} % of them re-sent with the same id;`,
    'every consumer SIGKILLed part-way and started again.',
  ];
  for (const broker of [...new Set(rows.map((r) => r.broker))]) {
    out.push('', broker, line(COLUMNS.map(([title]) => title)));
    for (const r of rows.filter((x) => x.broker === broker)) {
      out.push(line(COLUMNS.map(([, , cell]) => cell(r))));
      // A chain's stages, under its row: only their effects and whether they equal unique.
      for (const st of r.stages ?? [])
        out.push(
          line(
            COLUMNS.map(([title]) =>
              title === 'example'
                ? `  ${st.name}`
                : title === 'effects'
                  ? st.total
                  : title === 'effects = unique'
                    ? st.total === r.unique && st.unique === r.unique
                      ? 'yes'
                      : 'NO'
                    : '',
            ),
          ).trimEnd(),
        );
    }
  }
  out.push('', 'domain checks:');
  for (const r of rows) {
    out.push(`  ${r.name}: ${r.domain.ok ? 'holds' : 'FAILS'}: ${r.domain.detail}`);
    for (const p of r.problems) out.push(`  ${r.name}: PROBLEM: ${p}`);
  }
  out.push(
    '',
    '"killed at": effects in PostgreSQL when the consumers were SIGKILLed.',
    '* as reported by the consumer processes (settled deliveries: processed, duplicate, conflict, failed).',
    '  A SIGKILLed process cannot report its last moments (its last ~50 ms, and messages committed but',
    '  not yet counted), so these can fall short; "effects" is counted in PostgreSQL and is exact.',
  );
  if (rows.some((r) => r.broker === 'http'))
    out.push(
      'http: "sent" counts every request the client made, concurrent duplicates and retries included; the',
      '  server processes report their keys (processed: charges made, duplicate: stored responses replayed).',
    );
  return out.join('\n');
}
