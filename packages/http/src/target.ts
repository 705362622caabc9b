/**
 * The request target as the fingerprint compares it: path and query, normalised the way RFC 3986
 * §6.2.2 compares URIs (syntax-based normalisation) and no further.
 *
 * - `%2f` and `%2F` are one byte: percent-encodings get upper-case hex digits;
 * - `%41` and `A` are one character: percent-encoded unreserved characters (`A-Z a-z 0-9 - . _ ~`)
 *   are decoded;
 * - `/a/./b/../c` and `/a/c` are one path: dot segments are removed (§5.2.4);
 * - characters a URI cannot hold (a space, `"`, `{`, non-ASCII ...) are percent-encoded as UTF-8,
 *   as a client's URL parser would send them, and a `%` that starts no percent-encoding becomes
 *   `%25`;
 * - everything else is compared as sent: the query keeps its order (`?a=1&b=2` is not
 *   `?b=2&a=1`), `+` is not a space, and an encoded reserved character is not the character
 *   (`%2F` is not `/`, `%26` is not `&`).
 *
 * An absolute-form target (`http://host/path?q`) is reduced to its path and query (`/path?q`); a
 * fragment, which clients never send, is dropped; the asterisk form (`*`) stays as it is.
 */
export function canonicalTarget(target: string): string {
  // Most targets need nothing: only characters a URI holds as they are, no percent-encoding, no
  // dot segment, no fragment.
  if (SIMPLE.test(target) && !DOT_SEGMENT.test(target)) return target;
  if (target === '*') return target;
  const raw = originForm(cutFragment(target));
  const q = raw.indexOf('?');
  const path = removeDotSegments(normalisePart(q < 0 ? raw : raw.slice(0, q)));
  return q < 0 ? path : `${path}?${normalisePart(raw.slice(q + 1))}`;
}

// RFC 3986 §2.2 and §2.3: what a URI may hold unencoded ('#' never reaches here, '%' is handled
// on its own).
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
const ALLOWED = /^[A-Za-z0-9\-._~:/?[\]@!$&'()*+,;=]$/;
const HEX2 = /^[0-9A-Fa-f]{2}$/;
const SIMPLE = /^\/[A-Za-z0-9\-._~:/?[\]@!$&'()*+,;=]*$/;
const DOT_SEGMENT = /\/\.\.?(?:[/?]|$)/;
const SCHEME_AUTHORITY = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?]*/;

function cutFragment(target: string): string {
  const hash = target.indexOf('#');
  return hash < 0 ? target : target.slice(0, hash);
}

function originForm(target: string): string {
  const m = SCHEME_AUTHORITY.exec(target);
  if (m === null) return target;
  const rest = target.slice(m[0].length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

/** Percent-encoding normalisation of one component (path or query). */
function normalisePart(part: string): string {
  let out = '';
  for (let i = 0; i < part.length; ) {
    const c = part[i] as string;
    if (c === '%') {
      const hex = part.slice(i + 1, i + 3);
      if (HEX2.test(hex)) {
        const ch = String.fromCharCode(Number.parseInt(hex, 16));
        out += UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
        i += 3;
      } else {
        out += '%25';
        i += 1;
      }
      continue;
    }
    if (ALLOWED.test(c)) {
      out += c;
      i += 1;
      continue;
    }
    const cp = part.codePointAt(i) as number;
    const width = cp > 0xffff ? 2 : 1;
    if (cp >= 0xd800 && cp <= 0xdfff) {
      // A lone surrogate has no UTF-8. `%u` + hex is a form no target text can normalise to
      // (a `%` not followed by two hex digits always becomes `%25`), so it stays one of a kind.
      out += `%u${cp.toString(16).toUpperCase()}`;
    } else {
      for (const byte of Buffer.from(part.slice(i, i + width), 'utf8')) {
        out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
      }
    }
    i += width;
  }
  return out;
}

/** RFC 3986 §5.2.4, on a path whose unreserved percent-encodings are already decoded. */
function removeDotSegments(path: string): string {
  if (!path.includes('.')) return path;
  let input = path;
  const output: string[] = [];
  while (input.length > 0) {
    if (input.startsWith('../')) input = input.slice(3);
    else if (input.startsWith('./')) input = input.slice(2);
    else if (input.startsWith('/./')) input = input.slice(2);
    else if (input === '/.') input = '/';
    else if (input.startsWith('/../')) {
      input = input.slice(3);
      output.pop();
    } else if (input === '/..') {
      input = '/';
      output.pop();
    } else if (input === '.' || input === '..') input = '';
    else {
      const next = input.indexOf('/', input.startsWith('/') ? 1 : 0);
      const end = next < 0 ? input.length : next;
      output.push(input.slice(0, end));
      input = input.slice(end);
    }
  }
  return output.join('');
}
