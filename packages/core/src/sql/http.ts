/**
 * The statements of `@once/http`'s stored responses (migration 8), built once per schema. The
 * schema is the only identifier spliced in, validated and quoted by `quoteIdentifier`.
 */
export function httpSql(schema: string) {
  const inbox = `${schema}.inbox`;
  return Object.freeze({
    /** Before the route handler's first statement: a 4xx rolls back to here, keeping the claim. */
    savepoint: 'SAVEPOINT once_http_handler',
    rollbackToSavepoint: 'ROLLBACK TO SAVEPOINT once_http_handler',
    /** In the key's transaction. $1 consumer, $2 id, $3 status, $4 headers json, $5 body. */
    storeResponse: `UPDATE ${inbox} SET response_status = $3, response_headers = $4::jsonb, response_body = $5
      WHERE consumer = $1 AND message_id = $2`,
    /** A completed key's row. $1 consumer, $2 id. */
    readResponse: `SELECT status, response_status, response_headers, response_body FROM ${inbox}
      WHERE consumer = $1 AND message_id = $2`,
  });
}
