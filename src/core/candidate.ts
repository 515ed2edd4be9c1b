/**
 * A candidate as git holds it: the scope check of its changed paths, its commit message (the
 * proposal travels in trailers), and adopting a candidate committed just before a crash.
 */

import { closeSync, constants, fstatSync, ftruncateSync, openSync, readFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { fileRules } from "./file-patterns.ts";
import type { DiffStats } from "./ledger.ts";
import type { LoopDeps } from "./loop-deps.ts";
import { redactSecrets, secretRedactor } from "./secrets.ts";
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

/** Changed files larger than this are not searched for secrets (data, not code a researcher typed). */
const SECRET_SCAN_MAX_BYTES = 8 * 1024 * 1024;

/**
 * A candidate must not write a secret into the user's git history (docs/security.md "Secrets are
 * never recorded"): each changed file of the worktree is searched (src/core/secrets.ts) for
 * secrets its version at `parent` does not already hold. Files that carry one are rewritten with
 * the secrets redacted, before the commit, so the key never reaches a git object; the reason
 * returned rejects the candidate (its code was altered, so it is never run). Undefined: none.
 */
export async function secretLeak(
  ws: Workspace,
  parent: string,
  changed: string[],
): Promise<string | undefined> {
  const redactor = secretRedactor();
  const files: string[] = [];
  for (const path of changed) {
    if (path.startsWith("../")) continue;
    // The worktree is the researcher's: no link followed, no blocking open, regular files only.
    let fd: number;
    try {
      fd = openSync(join(ws.worktree, path), constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      continue;
    }
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || st.size > SECRET_SCAN_MAX_BYTES) continue;
      const text = readFileSync(fd, "utf8");
      const found = redactor.find(text);
      if (!found.length) continue;
      const before = (await ws.fileAt(parent, path)) ?? "";
      if (found.every((f) => before.includes(f))) continue;
      ftruncateSync(fd, 0);
      writeSync(fd, redactor.redact(text), 0, "utf8");
      files.push(path);
    } finally {
      closeSync(fd);
    }
  }
  if (!files.length) return undefined;
  return `secret: the change wrote a secret (an API key, a token) into ${files.join(", ")}; redacted before the commit, not run`;
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
  // A git object is forever: the proposal's texts go in without secrets (src/core/secrets.ts).
  return redactSecrets(`autolab #${n}: ${subject}\n\n${body ? `${body}\n\n` : ""}${trailers}\n`);
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
