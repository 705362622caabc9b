// The fake PostgreSQL of the fake drivers (fake.mjs, fake-rabbitmq.mjs, fake-kafka.mjs).

const ok = { command: 'INSERT', rowCount: 1, rows: [] };
/** Answers like node-postgres: a multi-statement string gets one result per statement. */
function answer(text, values) {
  // An older build's batch claim, with parameters: $2 holds the ids.
  if (values && text.includes('unnest($2')) {
    return {
      command: 'INSERT',
      rowCount: values[1].length,
      rows: values[1].map((message_id) => ({ message_id })),
    };
  }
  if (text === 'COMMIT') return { command: 'COMMIT', rowCount: null, rows: [] };
  if (!text.startsWith('BEGIN')) return ok;
  const ids = [];
  const arr = /ARRAY\[(.*?)\]::text\[\]/.exec(text);
  if (arr) for (const m of arr[1].matchAll(/'([^']*)'/g)) ids.push(m[1]);
  else if (text.includes('floor_inbox'))
    for (const m of text.matchAll(/\('[^']*', '([^']*)'/g)) ids.push(m[1]);
  const claim = {
    command: 'INSERT',
    rowCount: Math.max(ids.length, 1),
    rows: ids.map((message_id) => ({ message_id })),
  };
  return [{ command: 'BEGIN', rowCount: null, rows: [] }, claim];
}
/**
 * A pool whose queries answer at once, like node-postgres would on an empty database: claims take
 * every id. `client` is the one connection it hands out.
 */
export function fakePool() {
  const client = {
    query: (text, values) => Promise.resolve(answer(typeof text === 'string' ? text : text.text, values)),
    release() {},
    on() {},
    off() {},
  };
  const pool = { connect: () => Promise.resolve(client), query: (t) => client.query(t) };
  return { pool, client };
}
