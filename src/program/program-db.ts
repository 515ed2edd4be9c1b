import { readFileSync } from "node:fs";
import { parse } from "yaml";
import { splitFrontmatter } from "./frontmatter.ts";

/**
 * program.md's `db:` (the notebook's PostgreSQL address), read without validating the rest:
 * read-only views must find the notebook even when program.md is now broken. Undefined when
 * the file, its frontmatter or the key is missing or unreadable (loadProgram reports those).
 */
export function programDb(file: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  const split = splitFrontmatter(text);
  if (!split.ok) return undefined;
  try {
    const raw = parse(split.yaml) as { db?: unknown } | null;
    return typeof raw?.db === "string" && raw.db.trim() ? raw.db.trim() : undefined;
  } catch {
    return undefined;
  }
}
