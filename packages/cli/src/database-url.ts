import { CliError } from './cli-error.js';
import { ExitCode } from './exit-codes.js';
import { quote } from './json-text.js';
import { maskUrl } from './mask-url.js';

const PROTOCOLS = new Set(['postgres:', 'postgresql:', 'socket:']);

/**
 * Refuses a database URL before pg reads it (exit 2, `INVALID_DATABASE_URL`), quoting it only
 * masked: not a URL, not `postgres:`, `postgresql:` or `socket:`, an `@` after the host, or a user
 * name or password whose percent-encoding does not decode.
 *
 * An `@` after the host is how a password with an unencoded `/`, `?` or `#` looks: the URL
 * parser (and pg's) ends the host at that character, so part of the password would become the
 * host and port, the database name or a query parameter, and pg would connect somewhere else and
 * send a piece of the secret as a database name that the server's error then prints. An `@` that
 * really belongs after the host (a database name, a parameter value) is written `%40`, which pg
 * decodes.
 * `source` names where the URL came from (`--database-url`, `DATABASE_URL`).
 */
export function checkDatabaseUrl(url: string, source: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid(
      `${source} is not a valid URL, got ${quote(maskUrl(url))} ` +
        '(a "/", "?", "#" or "@" in a user name or password is percent-encoded: %2F, %3F, %23, %40)',
    );
  }
  if (!PROTOCOLS.has(parsed.protocol)) {
    throw invalid(`${source} must be a postgres:// URL, got ${quote(maskUrl(url))}`);
  }
  if (`${parsed.pathname}${parsed.search}${parsed.hash}`.includes('@')) {
    throw invalid(
      `${source} has an "@" after its host, so where its password ends is unclear: ` +
        'percent-encode "/", "?", "#" and "@" in the user name and password (%2F, %3F, %23, %40) ' +
        `and an "@" after the host (%40); got ${quote(maskUrl(url))}`,
    );
  }
  // pg decodes both; a "%" that starts no UTF-8 escape would fail inside pg as "URI malformed".
  if (!decodes(parsed.username) || !decodes(parsed.password)) {
    throw invalid(
      `${source} has a "%" in its user name or password that is not a percent-encoding of UTF-8: ` +
        `write "%" as %25; got ${quote(maskUrl(url))}`,
    );
  }
}

function decodes(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

function invalid(message: string): CliError {
  return new CliError(ExitCode.Usage, 'INVALID_DATABASE_URL', message);
}
