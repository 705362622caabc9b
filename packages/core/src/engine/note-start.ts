/**
 * Start counting, for adapters whose broker counts receives rather than runs. Owns one decision:
 * a start is counted committed on its own (flushed: the statement pins synchronous_commit) before
 * the message runs, so a message that kills its consumer is the only one whose count rises.
 */

import { type Envelope, resolveId } from '../message/envelope.js';
import type { EngineContext } from './context.js';

/** Counts a start of `envelope`'s id and returns the count, this one included. */
export async function noteStart<R>(ctx: EngineContext<R>, envelope: Envelope): Promise<number> {
  const { pool, consumer, retentionMs, idOf } = ctx.o;
  const id = resolveId(envelope, idOf);
  const res = await pool.query<{ starts: number }>(ctx.sql.noteStart, [consumer, id, retentionMs]);
  return res.rows[0]!.starts;
}

/** Takes back one counted start of `envelope`'s id whose run spent no attempt. */
export async function forgetStart<R>(ctx: EngineContext<R>, envelope: Envelope): Promise<void> {
  const { pool, consumer, idOf } = ctx.o;
  await pool.query(ctx.sql.forgetStart, [consumer, resolveId(envelope, idOf)]);
}
