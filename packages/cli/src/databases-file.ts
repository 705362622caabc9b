import { readFileSync } from 'node:fs';
import { DATABASE_NAME_PATTERN } from '@once/core';
import { nearest } from '@once/core/admin';
import { CliError } from './cli-error.js';
import { checkDatabaseUrl } from './database-url.js';
import { ExitCode } from './exit-codes.js';
import { quote } from './json-text.js';

/** The commands `--database all` runs on every database of the file, one after the other. */
export const ALL_DATABASES_COMMANDS: readonly string[] = Object.freeze([
  'migrate',
  'purge',
  'status',
  'failed list',
  'outbox status',
]);

/** One database of a `--databases` file. */
export interface NamedUrl {
  /** Its name in the file. */
  readonly name: string;
  /** Its `postgres://` URL, checked. */
  readonly url: string;
}

/**
 * Reads a `--databases` file: a JSON object of database name → PostgreSQL URL, in the file's
 * order. Each URL is handed to `onSecret` as soon as the file parses, before any check can
 * quote it, so that everything printed afterwards is redacted. Every refusal is exit 2,
 * `INVALID_DATABASES_FILE` (or `INVALID_DATABASE_URL`, naming `databases.<name>`), and quotes
 * no URL unmasked. `source` names where the path came from (`--databases`, `ONCE_DATABASES`).
 */
export function readDatabasesFile(path: string, source: string, onSecret: (url: string) => void): NamedUrl[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw invalid(`${source}: cannot read ${quote(path)}${typeof code === 'string' ? ` (${code})` : ''}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not the parser's message: V8's quotes the text around the fault, which may be a password.
    throw invalid(`${source}: ${quote(path)} is not valid JSON`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw invalid(`${source}: ${quote(path)} must hold a JSON object of database name → postgres:// URL`);
  }
  const entries = Object.entries(parsed as Record<string, unknown>);
  for (const [, url] of entries) if (typeof url === 'string') onSecret(url);
  if (entries.length === 0) throw invalid(`${source}: ${quote(path)} names no database`);
  for (const [name, url] of entries) {
    if (!DATABASE_NAME_PATTERN.test(name)) {
      throw invalid(
        `${source}: databases.${name} is not a database name: 1 to 63 characters of [A-Za-z0-9_.-], got ${quote(name)}`,
      );
    }
    if (name === 'all') {
      throw invalid(
        `${source}: databases.all: "all" cannot name a database, since --database all means every one of them; rename it`,
      );
    }
    if (typeof url !== 'string') {
      throw invalid(`${source}: databases.${name} must be a postgres:// URL string, got ${kind(url)}`);
    }
    checkDatabaseUrl(url, `databases.${name}`);
  }
  return entries.map(([name, url]) => ({ name, url: url as string }));
}

/**
 * The databases `--database <name|all>` picks: one by name, or all of them. An unknown name is
 * exit 2, `UNKNOWN_DATABASE`, naming the nearest known one.
 */
export function pickDatabases(databases: readonly NamedUrl[], choice: string): NamedUrl[] {
  if (choice === 'all') return [...databases];
  const found = databases.find((d) => d.name === choice);
  if (found) return [found];
  const names = databases.map((d) => d.name);
  const near = nearest(choice, names);
  throw new CliError(
    ExitCode.Usage,
    'UNKNOWN_DATABASE',
    `--database ${quote(choice)} is not in the databases file${near ? `; did you mean ${quote(near)}?` : ''} (known: ${names.join(', ')}, or all)`,
  );
}

function kind(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value;
}

function invalid(message: string): CliError {
  return new CliError(ExitCode.Usage, 'INVALID_DATABASES_FILE', message);
}
