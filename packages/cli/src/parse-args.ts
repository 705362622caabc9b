import { InvalidArgumentError } from 'commander';

/**
 * A commander value parser for a whole number of at least `min`. A bad value is a usage error
 * (exit 2) that names the rule, e.g. `--batch-size must be a whole number >= 1, got "ten"`.
 */
export function integerAtLeast(min: number): (value: string) => number {
  return (value: string) => {
    const n = /^\s*\d+\s*$/.test(value) ? Number(value) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`must be a whole number >= ${min}, got ${JSON.stringify(value)}`);
    }
    return n;
  };
}
