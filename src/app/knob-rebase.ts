import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { readKnobs, writeKnob } from "../agents/builtin/knobs.ts";
import type { ParallelHooks } from "../core/loop.ts";
import type { Program } from "../core/types.ts";

type RebaseKnobs = NonNullable<ParallelHooks["rebaseKnobs"]>;

/**
 * The rebase of a tuner's candidate whose knob lines conflict with the new best: a proposal of
 * the built-in optimizer is a point in knob space, so rebasing it means writing its knob values
 * into the new best's files. Only when the candidate changed nothing but knob literals (its
 * files equal its parent's with those literals replaced); otherwise undefined (stale).
 */
export function knobRebaser(program: Program): RebaseKnobs {
  const names = new Set(Object.keys(program.search));
  return async ({ workspace: ws, exp, onto, n, message, changed }) => {
    const knobs = Object.keys(changed).filter((k) => names.has(k));
    if (knobs.length === 0) return undefined;
    // The literal each changed knob has in the candidate, and the candidate is knob-only.
    const literals = new Map<string, string>();
    const paths = await ws.changedPaths(exp.parentCommit, exp.commit);
    for (const path of paths) {
      const before = await ws.fileAt(exp.parentCommit, path);
      const after = await ws.fileAt(exp.commit, path);
      if (before === undefined || after === undefined) return undefined;
      let replayed = before;
      for (const k of knobs) {
        const literal = literalOf(after, path, k);
        if (literal === undefined) continue;
        literals.set(k, literal);
        replayed = writeKnob(replayed, k, literal);
      }
      if (replayed !== after) return undefined;
    }
    await ws.resetTo(onto);
    const snapshot = await ws.snapshot();
    for (const path of paths) {
      const abs = join(ws.projectDir, path);
      let text = await readFile(abs, "latin1");
      for (const [k, literal] of literals)
        if (literalOf(text, path, k) !== undefined) text = writeKnob(text, k, literal);
      await writeFile(abs, text, "latin1");
    }
    const changedNow = await ws.changes(snapshot);
    if (changedNow.length === 0) return undefined;
    return ws.commitCandidate(n, changedNow, message);
  };
}

function literalOf(text: string, path: string, knob: string): string | undefined {
  try {
    return readKnobs([{ path, text }], [knob]).get(knob)?.literal;
  } catch {
    return undefined;
  }
}
