/**
 * A database URL safe to print: its password becomes `***`. It works on the text as typed, not
 * on a parse of it, because a password with an unencoded `/`, `?`, `#`, `@` or `&` parses with
 * pieces of the secret in the host, path, query or fragment. So the rule is the conservative one:
 * hidden are everything from the first `:` after `scheme://` to the last `@`, and everything after
 * a query parameter whose name says password (`password=`, `sslpassword=`; libpq's
 * `key=value` form too), to the end of the text. At worst a port, path or another parameter is
 * hidden with the password; a piece of a password is never shown.
 */
export function maskUrl(url: string): string {
  const hidden = new Uint8Array(url.length);
  for (const [from, to] of [userinfoPassword(url), passwordParameter(url)]) hidden.fill(1, from, to);
  let out = '';
  for (let i = 0; i < url.length; i++) {
    if (hidden[i] === 0) out += url[i];
    else if (i === 0 || hidden[i - 1] === 0) out += '***';
  }
  return out;
}

type Range = readonly [from: number, to: number];
const NOTHING: Range = [0, 0];

// Where userinfo can start: after `scheme://`, after `scheme:` without slashes, or at the start of
// a text that is not a URL at all.
const SCHEME = /^[a-z][a-z0-9+.-]*:/i;

function userinfoPassword(url: string): Range {
  const at = url.lastIndexOf('@');
  if (at < 0) return NOTHING;
  const slashes = url.indexOf('//');
  const start = slashes >= 0 && slashes < at ? slashes + 2 : (SCHEME.exec(url)?.[0].length ?? 0);
  const colon = url.indexOf(':', start);
  // No colon before the last @: a user name alone.
  return colon < 0 || colon > at ? NOTHING : [colon + 1, at];
}

// A parameter name after `?`, `&` or whitespace.
const PARAMETER_NAME = /(?:^|[?&\s])([^=&?\s]*)=/g;

function passwordParameter(url: string): Range {
  for (const m of url.matchAll(PARAMETER_NAME)) {
    if (/password/i.test(decoded(m[1] ?? ''))) return [m.index + m[0].length, url.length];
  }
  return NOTHING;
}

// pg reads parameter names percent-decoded: `pass%77ord` is `password` to it.
function decoded(name: string): string {
  try {
    return decodeURIComponent(name);
  } catch {
    return name;
  }
}
