/**
 * Search on held-out noisy objectives (issue #17): the true value of the configuration each
 * method ends up calling its best, at equal numbers of evaluations (trials; every evaluation is
 * one noisy draw, a training seed), many seeds, 95% confidence intervals.
 *
 *   - autolab: the built-in optimizer's default sampler (the GP, src/agents/builtin/gp.ts)
 *     proposing, the default acceptance rule (src/trust/noise-judge.ts) deciding with the budget
 *     left in view, and the final best the configuration predicted best (src/trust/posterior.ts),
 *     as `autolab status` names it.
 *   - autolab, EI only: the same with the GP's acquisition as it was before session 13 (plain
 *     expected improvement, no escape to a Thompson draw from a measured-out basin).
 *   - autolab before #17: the TPE sampler, the rule without the budget, the last kept as the best.
 *   - greedy: TPE proposals, kept whenever one draw looks better (autoresearch's rule).
 *   - random: uniform random configurations, each evaluated once; the best observed.
 *   - optuna TPE: Optuna's TPESampler (Debian python3-optuna), each trial evaluated once; the
 *     best observed trial.
 *   - optuna TPE + re-eval: Optuna on 80% of the evaluations, then its five best observed
 *     configurations re-evaluated with the remaining 20% (equally), the best mean chosen.
 *
 * Functions and seeds are held out (bench/_heldout.ts): no default was tuned on them. Figures
 * per function and budget: mean true regret (true value − optimum) ± 95% CI, and the paired
 * difference autolab − each other method (negative: autolab better; significant when the
 * interval excludes 0).
 *
 *   npm run bench -- search [--seeds=40] [--budgets=50,100,300] [--first-seed=0] [--no-optuna]
 *                           [--rules=greedy-final,posterior] [--answer=kept] [--lean]
 *                           [--functions=six-hump-camel,hartmann6,tabular]
 *   npm run bench -- search --slots=4 [...]   autolab and Optuna, serial vs 4 trials at once
 *
 * The default run is slow (Optuna to 300 trials, 120 studies in one process: it had not finished after 20 minutes on
 * 2 cores); `--seeds=10 --budgets=50,100` takes about 20 s.
 */
import { spawnSync } from "node:child_process";
import { createRng, mixSeed } from "../src/agents/builtin/rng.ts";
import { suggestTpe } from "../src/agents/builtin/tpe.ts";
import { createJudge, DEFAULT_ACCEPTANCE } from "../src/trust/acceptance.ts";
import { greedyJudge } from "../src/trust/greedy-judge.ts";
import { createNoiseJudge } from "../src/trust/noise-judge.ts";
import type { Point } from "./_functions.ts";
import { HELD_OUT, type NoisyFunction, SEARCH_SEEDS } from "./_heldout.ts";
import { runKeepLoop } from "./_keep-loop.ts";
import { findOptuna, PY_SUGGEST } from "./_optuna.ts";
import { runSlotsLoop } from "./_slots-loop.ts";
import { type Estimate, estimate, flags, numberFlag, round, show } from "./_stats.ts";

/** Random search: the true regret of the best observed configuration after each evaluation. */
function randomSearch(fn: NoisyFunction, seed: number, evals: number): number[] {
  const noise = createRng(mixSeed(seed, 7));
  let bestObserved = Number.POSITIVE_INFINITY;
  let bestTrue = Number.NaN;
  const out: number[] = [];
  for (let i = 0; i < evals; i++) {
    const s = suggestTpe(fn.space, [], createRng(mixSeed(seed, 8, i)), {
      direction: "minimize",
      startup: Number.POSITIVE_INFINITY,
    });
    const t = fn.f(s.params as Point); // numeric knobs only
    const y = t + fn.sigma * noise.normal();
    if (y < bestObserved) {
      bestObserved = y;
      bestTrue = t;
    }
    out.push(bestTrue - fn.optimum);
  }
  return out;
}

type Arm = "autolab" | "autolab, EI only" | "autolab before #17" | "greedy" | `autolab, ${string}`;

/**
 * `--rules=greedy,greedy-final,posterior`: arms "autolab, <rule>" — autolab's optimizer and
 * answer with that acceptance rule instead of the default (issue #38). `--answer=kept` names the
 * last kept configuration as these arms' answer instead of the predicted best.
 */
let ruleAnswer: "kept" | "predicted" = "predicted";

/** `--functions=hartmann6,tabular`: some of the held-out functions (one process each, in parallel). */
let onlyFunctions: string[] | undefined;
const heldOut = () => HELD_OUT.filter((fn) => !onlyFunctions || onlyFunctions.includes(fn.name));

/** Kept changes and truly worse ones among them, per arm over the whole run of the bench. */
const keepCounts = new Map<Arm, { keeps: number; worse: number }>();

function keepLoop(fn: NoisyFunction, seed: number, evals: number, arm: Arm): number {
  const rule = arm.startsWith("autolab, ") && arm !== "autolab, EI only" ? arm.slice(9) : undefined;
  const now = arm === "autolab" || arm === "autolab, EI only" || rule !== undefined;
  const r = runKeepLoop({
    fn,
    sigma: fn.sigma,
    judge:
      arm === "greedy"
        ? greedyJudge
        : rule
          ? createJudge(rule)
          : arm === "autolab before #17"
            ? createNoiseJudge()
            : createJudge(DEFAULT_ACCEPTANCE),
    totalTrials: evals,
    seed,
    proposer: now ? "gp" : "tpe",
    budgetAware: now,
    posterior: now,
    ...(arm === "autolab, EI only" ? { escape: false as const } : {}),
  });
  const c = keepCounts.get(arm) ?? { keeps: 0, worse: 0 };
  keepCounts.set(arm, { keeps: c.keeps + r.keeps.length, worse: c.worse + r.falseKeeps });
  if (rule && ruleAnswer === "kept") return r.finalTrue - fn.optimum;
  return (now ? (r.posteriorTrue ?? r.finalTrue) : r.finalTrue) - fn.optimum;
}

// The held-out functions in Python, so that Optuna sees exactly the objectives above.
const PYTHON = `
import json, math, sys, warnings
warnings.filterwarnings("ignore")
import numpy as np
import optuna
optuna.logging.set_verbosity(optuna.logging.ERROR)
cfg = json.loads(sys.argv[1])
H6A = [[10,3,17,3.5,1.7,8],[0.05,10,17,0.1,8,14],[3,3.5,1.7,10,17,8],[17,8,0.05,10,0.1,14]]
H6P = [[0.1312,0.1696,0.5569,0.0124,0.8283,0.5886],[0.2329,0.4135,0.8307,0.3736,0.1004,0.9991],
       [0.2348,0.1451,0.3522,0.2883,0.3047,0.6650],[0.4047,0.8828,0.8732,0.5743,0.1091,0.0381]]
HAL = [1,1.2,3,3.2]
def camel(p):
    x, y = p["X1"], p["X2"]
    return (4 - 2.1*x*x + x**4/3)*x*x + x*y + (-4 + 4*y*y)*y*y
def hartmann6(p):
    return -sum(HAL[i]*math.exp(-sum(H6A[i][j]*(p["X%d" % (j+1)]-H6P[i][j])**2 for j in range(6))) for i in range(4))
def tabular(p):
    d = p["DEPTH"]
    lr = math.log10(p["LR"]) - math.log10(0.05*math.sqrt(6/d))
    return (0.2 + 0.02*lr*lr + 0.0008*(d-7)**2 + 0.03*(p["SUBSAMPLE"]-0.8)**2
            + 0.002*(math.log10(p["MIN_CHILD"])-1)**2 + 0.001*(math.log10(p["L2"])+0.5)**2)
${PY_SUGGEST}
F = {"six-hump-camel": camel, "hartmann6": hartmann6, "tabular": tabular}
def serial(f, fn, seed, rng, budget):
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    rows = []
    def objective(trial):
        p = suggest(trial, fn["space"])
        t = f(p)
        y = t + fn["sigma"]*rng.standard_normal()
        rows.append((y, t, p))
        return y
    study.optimize(objective, n_trials=budget)
    return rows
def parallel(f, fn, seed, rng, budget, slots):
    # slots workers: ask when a worker is free, tell when its trial ends (0.9-1.1 time units,
    # as bench/_slots-loop.ts); running trials are the constant liar's. Rows in ask order: a run
    # of E trials is the first E asks of a longer one.
    sampler = optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    durations = np.random.default_rng(seed + 1000003)
    rows, running, now = [], [], 0.0
    def ask():
        trial = study.ask()
        p = suggest(trial, fn["space"])
        t = f(p)
        y = t + fn["sigma"]*rng.standard_normal()
        rows.append((y, t, p))
        running.append((now + durations.uniform(0.9, 1.1), len(rows), trial, y))
    for _ in range(min(slots, budget)):
        ask()
    while running:
        running.sort(key=lambda r: (r[0], r[1]))
        now, _, trial, y = running.pop(0)
        study.tell(trial, y)
        if len(rows) < budget:
            ask()
    return rows
out = {}
for fn in cfg["functions"]:
    f = F[fn["name"]]
    tpe, reeval = [], []
    for seed in cfg["seeds"]:
        rng = np.random.default_rng(seed)
        budget = max(cfg["budgets"])
        slots = cfg["slots"]
        rows = serial(f, fn, seed, rng, budget) if slots == 1 else parallel(f, fn, seed, rng, budget, slots)
        # TPE at each budget: the best observed trial among the first E (a run of E trials).
        tpe.append([min(rows[:e], key=lambda r: r[0])[1] - fn["optimum"] for e in cfg["budgets"]])
        row = []
        for e in cfg["budgets"]:
            first = int(round(0.8*e))
            top = sorted(rows[:first], key=lambda r: r[0])[:5]
            extra = (e - first) // len(top)
            best = min(top, key=lambda r: (r[0] + sum(f(r[2]) + fn["sigma"]*rng.standard_normal() for _ in range(extra)))/(1+extra))
            row.append(best[1] - fn["optimum"])
        reeval.append(row)
    out[fn["name"]] = {"tpe": tpe, "reeval": reeval}
print(json.dumps(out))
`;

type OptunaFigures = Record<string, { tpe: number[][]; reeval: number[][] }>;

/** Optuna's arms per function: [seed][budget] true regrets; `slots` > 1 with constant_liar. */
function runOptuna(
  seeds: number[],
  budgets: number[],
  slots: number,
  skip: boolean,
): { optuna?: OptunaFigures; note: string } {
  if (skip) return { note: "skipped (--no-optuna)" };
  const py = findOptuna();
  if (!py) return { note: "skipped: python3 cannot import optuna (Debian: apt-get install python3-optuna)" };
  const cfg = {
    seeds,
    budgets,
    slots,
    functions: heldOut().map((fn) => ({
      name: fn.name,
      space: fn.space,
      optimum: fn.optimum,
      sigma: fn.sigma,
    })),
  };
  const r = spawnSync(py.python, ["-c", PYTHON, JSON.stringify(cfg)], {
    encoding: "utf8",
    maxBuffer: 1 << 26,
  });
  if (r.status !== 0) {
    return {
      note: `skipped: the optuna run failed: ${(r.stderr || r.error?.message || "").trim().split("\n").pop()}`,
    };
  }
  return { optuna: JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}"), note: `optuna ${py.version}` };
}

/**
 * `--slots=k`: autolab and Optuna at equal total evaluations, serially and with k trials at
 * once: autolab through bench/_slots-loop.ts (the scheduler simulated, proposals with pending
 * experiments as constant liars), Optuna asking while k trials run (`constant_liar=True`).
 * Per function and budget: each arm serial and at k slots, the paired difference k slots −
 * serial, and autolab − each Optuna arm at k slots.
 */
function compareSlots(
  seeds: number[],
  budgets: number[],
  slots: number,
  noOptuna: boolean,
  t0: number,
): Record<string, unknown> {
  const serial = runOptuna(seeds, budgets, 1, noOptuna);
  const parallel = runOptuna(seeds, budgets, slots, noOptuna);
  console.log(
    `true regret of the final best, mean ± 95% CI over ${seeds.length} held-out seeds (${seeds[0]}–${seeds.at(-1)}), serial vs ${slots} slots at equal evaluations; ${parallel.note}`,
  );
  const figures: Record<string, unknown> = {
    benchmark: "search",
    slots,
    seeds: seeds.length,
    first_seed: seeds[0],
    budgets,
    optuna: parallel.note,
  };
  const counts = { keeps: 0, worse: 0, rebased: 0, runs: 0 };
  for (const fn of heldOut()) {
    budgets.forEach((evals, bi) => {
      const atSlots = (seed: number) => {
        const r = runSlotsLoop({
          fn,
          sigma: fn.sigma,
          judge: createNoiseJudge(),
          totalTrials: evals,
          seed,
          slots,
          proposer: "gp",
        });
        counts.keeps += r.keeps;
        counts.worse += r.falseKeeps;
        counts.rebased += r.rebased;
        counts.runs++;
        return r.posteriorTrue - fn.optimum;
      };
      const arms: Record<string, { serial: number[]; slots: number[] }> = {
        autolab: { serial: seeds.map((s) => keepLoop(fn, s, evals, "autolab")), slots: seeds.map(atSlots) },
      };
      const o1 = serial.optuna?.[fn.name];
      const ok = parallel.optuna?.[fn.name];
      if (o1 && ok) {
        const at = (rows: number[][]) => rows.map((r) => r[bi] as number);
        arms["optuna TPE"] = { serial: at(o1.tpe), slots: at(ok.tpe) };
        arms["optuna TPE + re-eval"] = { serial: at(o1.reeval), slots: at(ok.reeval) };
      }
      console.log(`${fn.name} (σ ${fn.sigma}), ${evals} evaluations`);
      const entry: Record<string, Record<string, number>> = {};
      for (const [name, a] of Object.entries(arms)) {
        const [one, k, d] = [estimate(a.serial), estimate(a.slots), paired(a.slots, a.serial)];
        console.log(
          `  ${name.padEnd(22)} serial ${show(one)}   ${slots} slots ${show(k)}   ${slots} slots − serial ${show(d)}`,
        );
        entry[name] = {
          serial: round(one.mean),
          serial_ci: round(one.ci, 2),
          slots: round(k.mean),
          slots_ci: round(k.ci, 2),
          slots_minus_serial: round(d.mean),
          slots_minus_serial_ci: round(d.ci, 2),
        };
      }
      const auto = arms.autolab as { serial: number[]; slots: number[] };
      for (const name of ["optuna TPE", "optuna TPE + re-eval"]) {
        const a = arms[name];
        if (!a) continue;
        const [d, d1] = [paired(auto.slots, a.slots), paired(auto.serial, a.serial)];
        console.log(
          `  autolab − ${name}: at ${slots} slots ${show(d)} (${significance(d)}); serial ${show(d1)} (${significance(d1)})`,
        );
        Object.assign(entry[name] as Record<string, number>, {
          autolab_minus_at_slots: round(d.mean),
          autolab_minus_at_slots_ci: round(d.ci, 2),
          autolab_minus_serial: round(d1.mean),
          autolab_minus_serial_ci: round(d1.ci, 2),
        });
      }
      figures[`${fn.name}/${evals}`] = entry;
    });
  }
  const serialKeeps = keepCounts.get("autolab") ?? { keeps: 0, worse: 0 };
  const pct = (c: { keeps: number; worse: number }) => round((100 * c.worse) / Math.max(1, c.keeps), 3);
  console.log(
    `truly worse among kept changes: autolab serial ${pct(serialKeeps)}% of ${serialKeeps.keeps}, ${slots} slots ${pct(counts)}% of ${counts.keeps}; winners rebased onto a newer best: ${round(counts.rebased / Math.max(1, counts.runs), 3)} per run`,
  );
  figures.truly_worse_keeps_pct = { serial: pct(serialKeeps), slots: pct(counts) };
  figures.rebased_per_run = round(counts.rebased / Math.max(1, counts.runs), 3);
  figures.seconds = round((performance.now() - t0) / 1000, 3);
  return figures;
}

/** Paired difference a − b over seeds, mean ± 95% CI. */
function paired(a: readonly number[], b: readonly number[]): Estimate {
  return estimate(a.map((x, i) => x - (b[i] as number)));
}

const significance = (d: Estimate) =>
  d.mean + d.ci < 0 ? "autolab better" : d.mean - d.ci > 0 ? "autolab WORSE" : "within noise";

export async function main(args: string[]): Promise<Record<string, unknown>> {
  const f = flags(args);
  const seedCount = numberFlag(f, "seeds", 40);
  const budgets = (f.budgets ?? "50,100,300").split(",").map(Number);
  if (budgets.some((b) => !(b >= 10))) throw new Error("--budgets: evaluations per run, each at least 10");
  // --first-seed: an offset into the held-out seeds (seeds already looked at can be skipped).
  const first = SEARCH_SEEDS + numberFlag(f, "first-seed", 0);
  const seeds = Array.from({ length: seedCount }, (_, i) => first + i);
  const rules = f.rules ? f.rules.split(",") : [];
  if (f.answer === "kept") ruleAnswer = "kept";
  if (f.functions) onlyFunctions = f.functions.split(",");
  const t0 = performance.now();
  if (f.slots !== undefined) {
    const slots = numberFlag(f, "slots", 4);
    if (!(Number.isInteger(slots) && slots >= 2)) throw new Error("--slots: trials at once, at least 2");
    return compareSlots(seeds, budgets, slots, Boolean(f["no-optuna"]), t0);
  }
  const { optuna, note: optunaNote } = runOptuna(seeds, budgets, 1, Boolean(f["no-optuna"]));

  console.log(
    `true regret of the final best (true value − optimum; lower is better), mean ± 95% CI over ${seedCount} held-out seeds; ${optunaNote || "optuna"}`,
  );
  const figures: Record<string, unknown> = {
    benchmark: "search",
    seeds: seedCount,
    budgets,
    optuna: optunaNote,
  };
  for (const fn of heldOut()) {
    const random = seeds.map((s) => randomSearch(fn, s, Math.max(...budgets)));
    budgets.forEach((evals, bi) => {
      const methods: Record<string, number[]> = {
        autolab: seeds.map((s) => keepLoop(fn, s, evals, "autolab")),
        // --lean: without the two arms of earlier sessions (EI only, before #17).
        ...(f.lean
          ? {}
          : { "autolab, EI only": seeds.map((s) => keepLoop(fn, s, evals, "autolab, EI only")) }),
        ...Object.fromEntries(
          rules.map((rule) => [
            `autolab, ${rule}`,
            seeds.map((s) => keepLoop(fn, s, evals, `autolab, ${rule}`)),
          ]),
        ),
        ...(f.lean
          ? {}
          : { "autolab before #17": seeds.map((s) => keepLoop(fn, s, evals, "autolab before #17")) }),
        greedy: seeds.map((s) => keepLoop(fn, s, evals, "greedy")),
        random: random.map((r) => r[evals - 1] as number),
      };
      const o = optuna?.[fn.name];
      if (o) {
        methods["optuna TPE"] = o.tpe.map((r) => r[bi] as number);
        methods["optuna TPE + re-eval"] = o.reeval.map((r) => r[bi] as number);
      }
      const auto = methods.autolab as number[];
      console.log(`${fn.name} (σ ${fn.sigma}), ${evals} evaluations`);
      const entry: Record<string, unknown> = {};
      for (const [name, values] of Object.entries(methods)) {
        const e = estimate(values);
        const d = name === "autolab" ? undefined : paired(auto, values);
        console.log(
          `  ${name.padEnd(22)} ${show(e)}${d ? `   autolab − ${name} ${show(d)} (${significance(d)})` : ""}`,
        );
        entry[name] = {
          regret: round(e.mean),
          ci: round(e.ci, 2),
          ...(d ? { autolab_minus: round(d.mean), autolab_minus_ci: round(d.ci, 2) } : {}),
        };
      }
      figures[`${fn.name}/${evals}`] = entry;
    });
  }
  const worse: Record<string, number> = {};
  for (const [arm, c] of keepCounts) worse[arm] = round((100 * c.worse) / Math.max(1, c.keeps), 3);
  console.log(
    `truly worse among kept changes (target ≤ 5% for autolab): ${Object.entries(worse)
      .map(([a, p]) => `${a} ${p}%`)
      .join(", ")}`,
  );
  figures.truly_worse_keeps_pct = worse;
  figures.seconds = round((performance.now() - t0) / 1000, 3);
  return figures;
}
