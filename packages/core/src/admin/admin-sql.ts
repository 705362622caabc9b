import { type AdminSql, adminSql } from '../sql/admin.js';
import { quoteIdentifier } from '../sql/identifier.js';

/** The admin statements of `schema`, validated and quoted as everywhere in core. */
export function sqlOf(schema: string): AdminSql {
  return adminSql(quoteIdentifier(schema, 'schema'));
}

/** Identifies one inbox row. */
export interface MessageKey {
  /** The consumer name the inbox was created with. */
  readonly consumer: string;
  /** The message id the row was recorded under. */
  readonly messageId: string;
}
