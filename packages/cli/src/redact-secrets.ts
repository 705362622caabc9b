import { jsonText } from './json-text.js';
import { maskUrl } from './mask-url.js';

// An argument that can carry a connection secret: a URL, a `password=` parameter, a postgres:
// URL without slashes. Other arguments (ids, names) are never rewritten.
const MAY_HOLD_SECRET = /:\/\/|password=|^(?:--?[^=]*=)?(?:postgres|postgresql|socket):/i;

/** A redactor: a function over text, to which more secrets can be added as they become known. */
export interface Redactor {
  (text: string): string;
  /** Redacts `secret` (a URL that may carry a password) from now on. */
  add(secret: string): void;
}

/**
 * A function that replaces every copy of a secret-bearing argument or of `DATABASE_URL` in a
 * text with its masked form ({@link maskUrl}). The CLI's own messages only ever quote the masked
 * URL; this is for text that echoes arguments as typed: the argument parser's errors (`unknown
 * option '--database-ur=postgres://app:pw@db/app'`). Copies as JSON writes them are replaced too.
 * The URLs of a `--databases` file are added once it is read.
 */
export function secretRedactor(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): Redactor {
  const masks = new Map<string, string>();
  // Longest first, so a whole argument is replaced before a value inside it.
  let secrets: string[] = [];
  const add = (secret: string) => {
    const masked = maskUrl(secret);
    if (masked === secret) return;
    masks.set(secret, masked);
    masks.set(jsonText(secret).slice(1, -1), jsonText(masked).slice(1, -1));
    secrets = [...masks.keys()].sort((a, b) => b.length - a.length);
  };
  for (const arg of argv) {
    if (!MAY_HOLD_SECRET.test(arg)) continue;
    add(arg);
    // `--option=value`: the value alone too, as a message may quote it without the option.
    const eq = arg.indexOf('=');
    if (arg.startsWith('-') && eq > 0) add(arg.slice(eq + 1));
  }
  if (env.DATABASE_URL) add(env.DATABASE_URL);
  const redact = (text: string) => secrets.reduce((t, s) => t.replaceAll(s, masks.get(s) ?? '***'), text);
  return Object.assign(redact, { add });
}
