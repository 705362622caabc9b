/**
 * The exact decimal value of a JSON number's text, written one way: `<digits>e<exponent>` with no
 * leading or trailing zero in the digits (`-12e-1` for `-1.2`, `1e0` for `1`, `1.0`, `1e0` and
 * `10e-1`), and `0` for every zero (`-0`, `0.0`, `0e99`). Two numbers denote the same value
 * exactly when their texts give the same string. No double is involved, so `1234567890.1234567`
 * and `1234567890.1234568` stay apart, and so do `1e400` and `1e401`.
 *
 * `text` must match the JSON number grammar (RFC 8259 §6); the parser has checked it. Linear in
 * the text's length, whatever the exponent: an exponent of a million digits is added to as a
 * string, never turned into a BigInt (whose decimal conversion is quadratic).
 */
export function canonicalNumber(text: string): string {
  let i = 0;
  const negative = text[0] === '-';
  if (negative) i = 1;
  let intEnd = i;
  while (intEnd < text.length && isDigit(text.charCodeAt(intEnd))) intEnd++;
  let fracStart = intEnd;
  let fracEnd = intEnd;
  if (text[intEnd] === '.') {
    fracStart = intEnd + 1;
    fracEnd = fracStart;
    while (fracEnd < text.length && isDigit(text.charCodeAt(fracEnd))) fracEnd++;
  }
  let digits = text.slice(i, intEnd) + text.slice(fracStart, fracEnd);
  const fractionLength = fracEnd - fracStart;
  let lead = 0;
  while (lead < digits.length && digits[lead] === '0') lead++;
  digits = digits.slice(lead);
  if (digits.length === 0) return '0';
  let trail = 0;
  while (digits[digits.length - 1 - trail] === '0') trail++;
  if (trail > 0) digits = digits.slice(0, digits.length - trail);
  // value = digits × 10^(E − fractionLength + trail)
  const adjust = trail - fractionLength;
  const expStart = fracEnd < text.length ? fracEnd + 1 : text.length;
  const exponent = addToExponent(text.slice(expStart), adjust);
  return `${negative ? '-' : ''}${digits}e${exponent}`;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

// Below this many digits an exponent is a safe integer with room for any adjustment (|adjust| is
// at most a body's length, well under 2^31).
const SAFE_DIGITS = 15;

/** `E + adjust` as a decimal integer string, `E` being the exponent's text (`''`, `5`, `+5`, `-0007`). */
function addToExponent(e: string, adjust: number): string {
  let sign = 1;
  let i = 0;
  if (e[0] === '+' || e[0] === '-') {
    sign = e[0] === '-' ? -1 : 1;
    i = 1;
  }
  while (i < e.length - 1 && e[i] === '0') i++;
  const magnitude = e.slice(i);
  if (magnitude.length <= SAFE_DIGITS) return String(sign * Number(magnitude || '0') + adjust);
  // |E| ≥ 10^15 > |adjust|: the sum has E's sign and magnitude |E| + sign·adjust, computed on
  // the last 15 digits with one carry or borrow into the rest.
  const t = sign * adjust;
  const high = magnitude.slice(0, -SAFE_DIGITS);
  const low = Number(magnitude.slice(-SAFE_DIGITS)) + t;
  const unit = 10 ** SAFE_DIGITS;
  let head = high;
  let tail = low;
  if (low >= unit) {
    head = stepDecimal(high, 1);
    tail = low - unit;
  } else if (low < 0) {
    head = stepDecimal(high, -1);
    tail = low + unit;
  }
  const joined = `${head}${String(tail).padStart(SAFE_DIGITS, '0')}`.replace(/^0+/, '');
  return `${sign < 0 ? '-' : ''}${joined}`;
}

/** A positive decimal integer string plus or minus one. */
function stepDecimal(digits: string, by: 1 | -1): string {
  const out = digits.split('');
  for (let k = out.length - 1; k >= 0; k--) {
    const d = Number(out[k]) + by;
    if (d >= 0 && d <= 9) {
      out[k] = String(d);
      return out.join('');
    }
    out[k] = by === 1 ? '0' : '9';
  }
  return `1${out.join('')}`; // only an increment can carry out of the top digit
}
