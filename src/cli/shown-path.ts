import { relative } from "node:path";

/** A path as a command prints it: relative to the working directory when inside it, else absolute. */
export function shownPath(p: string): string {
  const r = relative(process.cwd(), p);
  return r.startsWith("..") ? p : r;
}
