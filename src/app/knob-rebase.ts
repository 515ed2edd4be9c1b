import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { literalIn, writeKnob } from "../agents/builtin/knobs.ts";
import type { ParallelHooks } from "../core/parallel-coordination.ts";
import type { Program } from "../core/types.ts";
import { readUntrusted } from "../core/untrusted-file.ts";

/** Files larger than this are not replayed onto (a knob file is small). */
const MAX_REBASE_BYTES = 64 * 1024 * 1024;

type RebaseKnobs = NonNullable<ParallelHooks["rebaseKnobs"]>;

/**
 * The rebase of a candidate whose knob lines conflict with the new best (git merges line by
 * line, and knob lines sit next to each other): when the candidate changed nothing but knob
 * literals (the built-in optimizer always; a coding agent sometimes), rebasing it means writing
 * those values into the new best's files. Otherwise undefined (stale).
 */
export function knobRebaser(program: Program): RebaseKnobs {
  const names = Object.keys(program.search);
  return async ({ workspace: ws, exp, onto, n, message }) => {
    if (names.length === 0) return undefined;
    // Which knobs the candidate changed (their literals in its files), and that it changed
    // nothing else: its files equal its parent's with those literals replaced.
    const literals = new Map<string, string>();
    const paths = await ws.changedPaths(exp.parentCommit, exp.commit);
    for (const path of paths) {
      const before = await ws.fileAt(exp.parentCommit, path);
      const after = await ws.fileAt(exp.commit, path);
      if (before === undefined || after === undefined) return undefined;
      let replayed = before;
      for (const k of names) {
        const from = literalIn(before, k);
        const to = literalIn(after, k);
        if (to === undefined || from === undefined || from === to) continue;
        literals.set(k, to);
        replayed = writeKnob(replayed, k, to);
      }
      if (replayed !== after) return undefined;
    }
    if (literals.size === 0) return undefined;
    await ws.resetTo(onto);
    const snapshot = await ws.snapshot();
    // All read before any is written: a committed symlink (or anything but a plain file) is
    // neither read nor written through, and then nothing is replayed.
    const texts: string[] = [];
    for (const path of paths) {
      const read = readUntrusted(join(ws.projectDir, path), { maxBytes: MAX_REBASE_BYTES });
      if (!read.ok || read.truncated) return undefined;
      texts.push(read.bytes.toString("latin1"));
    }
    for (const [i, path] of paths.entries()) {
      const abs = join(ws.projectDir, path);
      let text = texts[i] as string;
      for (const [k, literal] of literals)
        if (literalIn(text, k) !== undefined) text = writeKnob(text, k, literal);
      await writeFile(abs, text, "latin1");
    }
    const changedNow = await ws.changes(snapshot);
    if (changedNow.length === 0) return undefined;
    return ws.commitCandidate(n, changedNow, message);
  };
}
