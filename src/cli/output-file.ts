/**
 * Where a command writes a file the user named (`export -o FILE`): autolab never overwrites a
 * user's existing file unless told to. An existing file is refused (OUTPUT_EXISTS) unless
 * `--append` (the command adds to it in its own way) or `--force` (it is replaced); a file that
 * does not exist is created with O_EXCL, so one made meanwhile is not clobbered either.
 */
import { existsSync, openSync, readFileSync } from "node:fs";
import { AutolabError } from "../core/errors.ts";

export type OutputMode = "create" | "append" | "replace";

/** How `path` will be written; throws where that would overwrite a file without --force. */
export function outputMode(path: string, flags: { append?: boolean; force?: boolean }): OutputMode {
  if (flags.append && flags.force) {
    throw new AutolabError(
      "BAD_FLAG",
      "--append and --force contradict each other.",
      "--append adds to the file; --force replaces it. Give one.",
    );
  }
  if (!existsSync(path)) return "create";
  if (flags.append) return "append";
  if (flags.force) return "replace";
  throw new AutolabError(
    "OUTPUT_EXISTS",
    `${path} exists: autolab does not overwrite a file it did not make.`,
    "Add --append to add this run to it, --force to replace it, or write to another file (-o).",
  );
}

/** The existing file's text when appending ("" otherwise): what the addition continues. */
export function existingText(path: string, mode: OutputMode): string {
  return mode === "append" ? readFileSync(path, "utf8") : "";
}

/** Opens `path` for the mode: exclusive create, append, or truncate. */
export function openOutput(path: string, mode: OutputMode): number {
  return openSync(path, mode === "create" ? "wx" : mode === "append" ? "a" : "w");
}
