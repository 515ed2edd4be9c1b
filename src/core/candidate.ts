/**
 * A candidate as git holds it: the scope check of its changed paths, its commit message (the
 * proposal travels in trailers), and adopting a candidate committed just before a crash.
 */

import { fileRules } from "./file-patterns.ts";
import type { DiffStats } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";
import type { Program, Proposal } from "./types.ts";
import type { Workspace } from "./workspace.ts";

/** Changed lines (added + removed) a candidate may have; more is rejected as out of scope. */
export const DEFAULT_MAX_DIFF_LINES = 5000;

export const NO_CHANGE = "no change: the researcher left the files as they were";

export function tooLarge(diff: DiffStats, max: number): string {
  return `scope: the diff is too large (${diff.insertions + diff.deletions} changed lines in ${diff.files} files; the limit is ${max})`;
}

/** Which changed paths a candidate may not touch; undefined when the change is in scope. */
export async function scopeViolation(
  ws: Workspace,
  program: Program,
  changed: string[],
): Promise<string | undefined> {
  const rules = fileRules(program.files);
  const outside = changed.filter((p) => p.startsWith("../"));
  const prot = changed.filter((p) => !p.startsWith("../") && rules.protected(p));
  const holdout = changed.filter((p) => !p.startsWith("../") && !prot.includes(p) && rules.holdout(p));
  const editable = changed.filter((p) => rules.editable(p));
  const other = changed.filter(
    (p) => !editable.includes(p) && !p.startsWith("../") && !prot.includes(p) && !holdout.includes(p),
  );
  const links = await ws.symlinks(editable);
  const parts: string[] = [];
  if (prot.length) parts.push(`changed protected file${prot.length > 1 ? "s" : ""} ${prot.join(", ")}`);
  if (holdout.length)
    parts.push(`changed holdout file${holdout.length > 1 ? "s" : ""} ${holdout.join(", ")}`);
  if (other.length) parts.push(`changed non-editable file${other.length > 1 ? "s" : ""} ${other.join(", ")}`);
  if (outside.length) parts.push(`changed files outside the project: ${outside.join(", ")}`);
  if (links.length) parts.push(`made symlinks: ${links.join(", ")}`);
  if (!parts.length) return undefined;
  return `scope: ${parts.join("; ")} (editable: ${program.files.editable.join(", ")})`;
}

/** The commit message carries the proposal, so a candidate committed just before a crash can be adopted. */
export function commitMessage(
  tag: string,
  n: number,
  agent: string,
  p: Proposal,
  extra: { role?: string; rebaseOf?: number } = {},
): string {
  const subject = (p.hypothesis.split("\n")[0] ?? "").slice(0, 100);
  const body = [p.hypothesis !== subject ? p.hypothesis : "", p.mechanism ? `Mechanism: ${p.mechanism}` : ""]
    .filter(Boolean)
    .join("\n\n");
  const trailers = [
    `Autolab-Run: ${tag}`,
    `Autolab-Experiment: ${n}`,
    `Autolab-Agent: ${agent}`,
    ...(extra.role ? [`Autolab-Role: ${extra.role}`] : []),
    ...(extra.rebaseOf !== undefined ? [`Autolab-Rebase-Of: ${extra.rebaseOf}`] : []),
    `Autolab-Proposal: ${JSON.stringify(p)}`,
  ].join("\n");
  return `autolab #${n}: ${subject}\n\n${body ? `${body}\n\n` : ""}${trailers}\n`;
}

/**
 * Records candidate n from its commit message (the proposal travels in trailers) when its ref
 * exists but its experiment row does not: the harness died between the two writes.
 */
export async function adoptCandidate(deps: LoopDeps, n: number): Promise<void> {
  const { ledger, run, workspace: ws, program } = deps;
  const commit = await ws.candidateRef(n);
  if (!commit) return;
  const message = await ws.commitMessage(commit);
  const trailer = (key: string) =>
    message
      .split("\n")
      .find((l) => l.startsWith(`${key}: `))
      ?.slice(key.length + 2);
  const line = trailer("Autolab-Proposal");
  const role = trailer("Autolab-Role");
  const rebaseOf = trailer("Autolab-Rebase-Of");
  if (!line) return;
  let proposal: Proposal;
  try {
    proposal = JSON.parse(line) as Proposal;
  } catch {
    return;
  }
  const parent = await ws.parentOf(commit);
  const exp = ledger.addExperiment({
    runId: run.id,
    n,
    agent: trailer("Autolab-Agent") ?? "unknown",
    ...(role ? { role } : {}),
    ...(rebaseOf !== undefined && Number.isInteger(Number(rebaseOf)) ? { rebaseOf: Number(rebaseOf) } : {}),
    parentCommit: parent,
    commit,
    ref: `refs/autolab/${run.tag}/${n}`,
    hypothesis: proposal.hypothesis,
    ...(proposal.mechanism ? { mechanism: proposal.mechanism } : {}),
    ...(proposal.params ? { params: proposal.params } : {}),
    diff: await ws.diffStats(parent, commit),
  });
  // The scope check ran before the commit, but its verdict was not recorded yet: check again.
  const changed = await ws.changedPaths(parent, commit);
  const reject = changed.length === 0 ? NO_CHANGE : await scopeViolation(ws, program, changed);
  if (reject) ledger.decide(exp.id, { action: "reject", reason: reject, mechanismConfirmed: null });
}
