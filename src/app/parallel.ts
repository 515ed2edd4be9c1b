import { dirname, join, resolve } from "node:path";
import { agentConfigFor, createAgent } from "../agents/index.ts";
import { AutolabError } from "../core/errors.ts";
import type { ExperimentRecord } from "../core/ledger.ts";
import type { LoopDeps } from "../core/loop-deps.ts";
import {
  type Chooser,
  type ParallelDeps,
  type Researcher,
  roleOutcome,
  type Slot,
} from "../core/scheduler.ts";
import type { Agent, Program } from "../core/types.ts";
import { createOrchestrator } from "../org/orchestrator.ts";
import { loadRoles, type Role, validateRoles } from "../org/roles.ts";
import type { GitWorkspace } from "../workspace/git-workspace.ts";
import { knobRebaser } from "./knob-rebase.ts";

/**
 * The scheduler (proposals pipelined ahead of trials, merging) runs when program.md asks for
 * slots — even `slots: 1`, one GPU kept busy while the agent thinks — or for an org. Without
 * either, the serial loop runs: autoresearch's rhythm, think then train.
 */
export function isParallel(program: Program): boolean {
  return program.slots !== undefined || program.org !== undefined;
}

/**
 * The org's roles from program.md's `org:` (validated against the program), or an error that
 * names the directory when it holds none.
 */
export function rolesOf(program: Program): Role[] {
  if (!program.org) return [];
  const dir = resolve(dirname(program.path), program.org.roles);
  const roles = loadRoles(dir);
  if (roles.length === 0) {
    throw new AutolabError(
      "ORG_EMPTY",
      `program.md has \`org: ${program.org.roles}\` but ${dir} holds no role files (*.md).`,
      "Add role files there (docs/org.md; `autolab init --example tiny-lm` writes an example org), or remove `org:` to run program.md's agent alone.",
    );
  }
  validateRoles(roles, program);
  return roles;
}

export interface ParallelOptions {
  /** An Agent object given by the caller (tests, embedding) proposes for every worker. */
  agent?: string | Agent;
}

/** Adds slots, proposer worktrees, researchers (roles) and the orchestrator to a serial loop's deps. */
export async function parallelDeps(
  deps: LoopDeps,
  workspace: GitWorkspace,
  opts: ParallelOptions,
): Promise<ParallelDeps> {
  const { program, run } = deps;
  const slotsSpec = program.slots ?? { count: 1, proposers: 1 };
  const roles = rolesOf(program);
  const researchers: Researcher[] = roles.length
    ? roles.map((role, k) => {
        const roleProgram: Program = {
          ...program,
          files: { ...program.files, editable: role.editable ?? program.files.editable },
        };
        return {
          role: role.name,
          program: roleProgram,
          instructions: role.instructions,
          agentFor: (i) => createAgent(role.agent, roleProgram, run.seed + 1 + k + 1000 * i),
        };
      })
    : [
        {
          program,
          agentFor: async (i) =>
            i === 0 || typeof opts.agent === "object"
              ? deps.agent
              : createAgent(
                  agentConfigFor(program, typeof opts.agent === "string" ? opts.agent : undefined),
                  program,
                  run.seed + 1000 * i,
                ),
        },
      ];
  // A role whose agent cannot be built (an unknown backend, a missing CLI) is bad input: say so
  // before any worktree is made. Agents are made once per worker (proposer 0's is this one).
  let instant = true;
  for (const r of researchers) {
    const make = r.agentFor;
    const made = new Map<number, Promise<Agent>>();
    r.agentFor = (i) => made.get(i) ?? (made.set(i, make(i)).get(i) as Promise<Agent>);
    instant &&= (await r.agentFor(0)).instant === true;
  }

  const slots: Slot[] = [];
  for (let j = 0; j < slotsSpec.count; j++) {
    const ws = j === 0 ? workspace : await workspace.openWorker(`s${j}`);
    const gpu = slotsSpec.gpus ? slotsSpec.gpus[j % slotsSpec.gpus.length] : undefined;
    slots.push({
      workspace: ws,
      setupStamp: j === 0 ? deps.setupStamp : join(ws.gitDir, "autolab-setup-done"),
      env: gpu !== undefined ? { CUDA_VISIBLE_DEVICES: String(gpu) } : {},
    });
  }
  const proposers: GitWorkspace[] = [];
  for (let i = 0; i < slotsSpec.proposers; i++) proposers.push(await workspace.openWorker(`p${i}`));

  const chooser = roles.length
    ? replayed(
        createOrchestrator({ roles, policy: program.org?.policy ?? "bandit", seed: run.seed }),
        deps.ledger.listExperiments(run.id),
        program,
      )
    : undefined;
  const executor = deps.executor;
  return {
    ...deps,
    slots,
    proposers,
    ...(executor.capacity ? { activeSlots: () => executor.capacity?.() ?? slots.length } : {}),
    researchers,
    ...(instant ? { instantProposals: true } : {}),
    ...(chooser ? { chooser } : {}),
    ...(Object.keys(program.search).length ? { rebaseKnobs: knobRebaser(program) } : {}),
  };
}

/** A resumed org continues learning from what its roles already did (decisions in order). */
function replayed(chooser: Chooser, exps: ExperimentRecord[], program: Program): Chooser {
  const metric = program.objective.metric;
  const decided = exps
    .filter((e) => e.role && e.decision)
    .sort((a, b) => (a.decision?.decidedAt ?? "").localeCompare(b.decision?.decidedAt ?? "") || a.n - b.n);
  for (const e of decided) {
    const outcome = roleOutcome(e, exps, metric);
    if (outcome) chooser.record(e.role as string, outcome);
  }
  return chooser;
}
