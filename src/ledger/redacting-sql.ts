import { redactSecrets } from "../core/secrets.ts";
import type { Sql, SqlValue } from "./sql.ts";

/**
 * The notebook's write boundary for secrets (docs/security.md "Secrets are never recorded"):
 * every string a statement writes (run, insert) passes through the secret redactor
 * (src/core/secrets.ts) — hypotheses, reasons, log tails, notes, JSON columns alike — so no
 * secret value or key-shaped token is ever stored, whichever code path wrote the row. Reads
 * are passed through as they are. Strings without a finding come back as the same string.
 */
export function redactingWrites(sql: Sql): Sql {
  const clean = (args: SqlValue[]): SqlValue[] =>
    args.map((a) => (typeof a === "string" ? redactSecrets(a) : a));
  return {
    get dialect() {
      return sql.dialect;
    },
    get order() {
      return sql.order;
    },
    get: (q, ...args) => sql.get(q, ...args),
    all: (q, ...args) => sql.all(q, ...args),
    run: (q, ...args) => sql.run(q, ...clean(args)),
    insert: (q, ...args) => sql.insert(q, ...clean(args)),
    exec: (q) => sql.exec(q),
    write: (fn) => sql.write(fn),
    read: (fn) => sql.read(fn),
    changeToken: () => sql.changeToken(),
    syncToken: () => sql.syncToken(),
    close: () => sql.close(),
  };
}
