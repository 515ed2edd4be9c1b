import { AutolabError } from "../../core/errors.ts";

/** A PostgreSQL notebook's address, taken apart. */
export interface PgTarget {
  /** For the driver: the URL without autolab's own `schema` parameter. */
  connectionString: string;
  /** The lab's schema: each lab its own, so several labs share one database (default `autolab`). */
  schema: string;
  /** For messages: the URL with its password masked (`:***@`). */
  shown: string;
}

/** Whether `where` names a PostgreSQL notebook rather than a SQLite file. */
export function isPgUrl(where: string): boolean {
  return /^postgres(ql)?:\/\//i.test(where);
}

/**
 * The URL with any password replaced by `***` (`postgres://u:***@h/db`), safe to print: the one
 * masking for every database address shown (the notebook's, the fleet's).
 */
export function maskUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@/]*@/i, "$1:***@");
}

/**
 * Parses `postgres://user[:password]@host[:port]/database[?schema=name&…]`. The password may
 * also come from PGPASSWORD or ~/.pgpass (the driver reads them), so program.md never needs one.
 */
export function parsePgUrl(url: string): PgTarget {
  const shown = maskUrl(url);
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw invalid(shown, "it is not a URL");
  }
  if (!/^postgres(ql)?:$/i.test(u.protocol)) throw invalid(shown, `its scheme is ${u.protocol}`);
  if (!u.hostname && !u.searchParams.get("host")) throw invalid(shown, "it names no host");
  const schema = u.searchParams.get("schema") ?? "autolab";
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(schema)) {
    throw invalid(shown, `schema "${schema}" is not a plain lower-case identifier (letters, digits, _)`);
  }
  u.searchParams.delete("schema");
  return { connectionString: u.toString(), schema, shown };
}

function invalid(shown: string, why: string): AutolabError {
  return new AutolabError(
    "DB_URL_INVALID",
    `the notebook address ${shown} is not a PostgreSQL URL: ${why}.`,
    "Use postgres://user@host[:port]/database[?schema=name] (the password from PGPASSWORD or ~/.pgpass), or a path to a SQLite file.",
  );
}
