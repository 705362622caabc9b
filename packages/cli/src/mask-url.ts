/**
 * A database URL safe to print: the password (in the userinfo or a `password=` query
 * parameter) becomes `***`. The URL parser handles well-formed URLs; a pattern pass after it
 * catches what a parser reads differently (`postgres:/u:pw@h` parses with the secret in the
 * path), so an error message never carries a secret whatever the user typed.
 */
export function maskUrl(url: string): string {
  let masked = url;
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    if (u.searchParams.has('password')) u.searchParams.set('password', '***');
    // URL re-encodes `***` in the query; keep it readable.
    masked = u.toString().replace(/password=%2A%2A%2A/g, 'password=***');
  } catch {}
  // `user:password@`, with or without `//` before it.
  return masked.replace(/([^\s:/@]*:)[^\s/@]+@/g, '$1***@').replace(/(password=)[^&\s]*/gi, '$1***');
}
