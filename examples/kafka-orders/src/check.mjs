// @ts-check
// The domain invariant, checked against what the producer sent (not against the effect rows
// themselves): each order recorded once, two ledger entries per order, debits = credits = the sum
// of the unique orders, and each customer debited exactly their own orders.

/** @typedef {import('./producer.mjs').SentOrder} SentOrder */

/**
 * @param {import('pg').Pool} pool
 * @param {string} schema
 * @param {SentOrder[]} orders the unique orders sent
 * @returns {Promise<{ ok: boolean, detail: string, customers: { customer: string, orders: number, expectedCents: number, debitedCents: number }[] }>}
 */
export async function checkOrders(pool, schema, orders) {
  /** @type {Map<string, { orders: number, cents: number }>} */
  const expected = new Map();
  for (const o of orders) {
    const e = expected.get(o.customer) ?? { orders: 0, cents: 0 };
    expected.set(o.customer, { orders: e.orders + 1, cents: e.cents + o.cents });
  }
  const total = orders.reduce((s, o) => s + o.cents, 0);
  const [counts, sums, unbalanced, debits] = await Promise.all([
    pool.query(`SELECT count(*)::int AS rows, count(DISTINCT order_id)::int AS ids FROM ${schema}.orders`),
    pool.query(
      `SELECT coalesce(sum(debit), 0)::float8 AS debits, coalesce(sum(credit), 0)::float8 AS credits FROM ${schema}.ledger`,
    ),
    pool.query(
      `SELECT count(*)::int AS n FROM (SELECT order_id FROM ${schema}.ledger GROUP BY order_id
       HAVING count(*) <> 2 OR sum(debit) <> sum(credit)) x`,
    ),
    pool.query(
      `SELECT substr(account, 10) AS customer, sum(debit)::float8 AS cents FROM ${schema}.ledger
       WHERE account LIKE 'customer:%' GROUP BY account`,
    ),
  ]);
  const { rows: recorded, ids } = counts.rows[0];
  const { debits: debitSum, credits: creditSum } = sums.rows[0];
  /** @type {Map<string, number>} */
  const debited = new Map(debits.rows.map((r) => [r.customer, Number(r.cents)]));
  const customers = [...expected].map(([customer, e]) => ({
    customer,
    orders: e.orders,
    expectedCents: e.cents,
    debitedCents: debited.get(customer) ?? 0,
  }));
  const wrongCustomers =
    customers.filter((c) => c.debitedCents !== c.expectedCents).length +
    [...debited.keys()].filter((c) => !expected.has(c)).length;
  const problems = [];
  if (recorded !== orders.length || ids !== orders.length)
    problems.push(`${recorded} order rows for ${ids} ids, expected ${orders.length}`);
  if (debitSum !== total || creditSum !== total)
    problems.push(`debits ${debitSum}, credits ${creditSum}, expected both ${total}`);
  if (unbalanced.rows[0].n > 0)
    problems.push(`${unbalanced.rows[0].n} orders without exactly one debit and one credit`);
  if (wrongCustomers > 0) problems.push(`${wrongCustomers} customers debited the wrong amount`);
  return {
    ok: problems.length === 0,
    detail:
      problems.length === 0
        ? `${orders.length} orders recorded once; ledger balanced: debits = credits = ${total} cents = the sum of unique orders; ${customers.length} customers each debited their own orders`
        : problems.join('; '),
    customers,
  };
}
