// @ts-check
// The example's stand-in for authentication: a fixed set of API tokens, each belonging to one
// account. The account a token authenticates is the principal of the idempotency scope, so two
// accounts that happen to pick the same Idempotency-Key never see each other's charge.

/** API token → account. A real service looks the token up (or verifies a signed one). */
export const TOKENS = Object.freeze({
  tok_acme_5f2c: 'acct_acme',
  tok_globex_91d0: 'acct_globex',
  tok_initech_7be4: 'acct_initech',
});

/** The tokens, in a fixed order (the demo's client rotates through them). */
export const TOKEN_LIST = Object.freeze(Object.keys(TOKENS));

/**
 * The account an `Authorization: Bearer <token>` header authenticates, or undefined.
 * @param {string | null} authorization
 * @returns {string | undefined}
 */
export function accountOf(authorization) {
  const m = /^Bearer\s+(\S+)$/i.exec(authorization ?? '');
  if (!m?.[1]) return undefined;
  return Object.hasOwn(TOKENS, m[1]) ? TOKENS[/** @type {keyof typeof TOKENS} */ (m[1])] : undefined;
}
