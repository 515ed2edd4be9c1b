/**
 * The built-in optimizer (src/agents/builtin/tpe.ts) against random search on the same test
 * functions with the same number of evaluations, and against Optuna's TPE when python3 can
 * import optuna (Debian: apt-get install python3-optuna); skipped with a message otherwise.
 *
 * Noise-free objectives: this measures the search, not the acceptance rule (bench/noise.ts).
 * Random search draws uniformly in the knob space (log knobs in log space) with the same
 * rounding as the built-in optimizer. Figures: mean best value found (minus the optimum, so
 * lower is better) ± 95% CI over seeds, and on how many seeds TPE beat random.
 *
 *   npm run bench -- optimizer [--seeds=100] [--evals=30] [--optuna-seeds=40] [--no-optuna]
 */
import { spawnSync } from "node:child_process";
import { createRng, mixSeed } from "../src/agents/builtin/rng.ts";
import { suggestTpe, type TpeObservation } from "../src/agents/builtin/tpe.ts";
import {
  branin,
  hartmann3,
  logQuadratic,
  logRosenbrock,
  type Point,
  type TestFunction,
} from "./_functions.ts";
import { findOptuna, PY_SUGGEST } from "./_optuna.ts";
import { type Estimate, estimate, flags, numberFlag, round, show } from "./_stats.ts";

const FUNCTIONS = [branin, hartmann3, logRosenbrock, logQuadratic];

function searchOnce(fn: TestFunction, seed: number, evals: number, random: boolean): number {
  const observations: TpeObservation[] = [];
  let best = Number.POSITIVE_INFINITY;
  for (let i = 0; i < evals; i++) {
    const s = suggestTpe(fn.space, observations, createRng(mixSeed(seed, i)), {
      direction: "minimize",
      // Random search: never leave the startup phase (uniform sampling, same rounding).
      ...(random ? { startup: Number.POSITIVE_INFINITY } : {}),
    });
    const v = fn.f(s.params as Point); // numeric knobs only
    observations.push({ params: s.params, value: v });
    best = Math.min(best, v);
  }
  return best - fn.optimum;
}

// The same four functions in Python, so that Optuna sees exactly the objectives above.
const PYTHON = `
import json, math, sys, warnings
warnings.filterwarnings("ignore")
import optuna
optuna.logging.set_verbosity(optuna.logging.ERROR)
cfg = json.loads(sys.argv[1])
H3A = [[3,10,30],[0.1,10,35],[3,10,30],[0.1,10,35]]
H3P = [[0.3689,0.117,0.2673],[0.4699,0.4387,0.747],[0.1091,0.8732,0.5547],[0.03815,0.5743,0.8828]]
HAL = [1,1.2,3,3.2]
def branin(p):
    x1, x2 = p["X1"], p["X2"]
    b = 5.1/(4*math.pi**2); c = 5/math.pi; t = 1/(8*math.pi)
    return (x2 - b*x1*x1 + c*x1 - 6)**2 + 10*(1-t)*math.cos(x1) + 10
def hartmann3(p):
    x = [p["X1"], p["X2"], p["X3"]]
    return -sum(HAL[i]*math.exp(-sum(H3A[i][j]*(x[j]-H3P[i][j])**2 for j in range(3))) for i in range(4))
def logrosen(p):
    x, y = p["X1"], p["X2"]
    return math.log1p(100*(y-x*x)**2 + (1-x)**2)
def logquad(p):
    lr = math.log10(p["LR"]) - math.log10(3e-3)
    h = (math.log2(p["HIDDEN"]) - math.log2(96))/2
    d = (p["DROPOUT"] - 0.1)*4
    return lr*lr + h*h + d*d
${PY_SUGGEST}
F = {"branin": branin, "hartmann3": hartmann3, "log-rosenbrock": logrosen, "log-quadratic": logquad}
out = {}
for fn in cfg["functions"]:
    f = F[fn["name"]]
    for mode in ("default", "multivariate"):
        res = []
        for seed in range(cfg["seeds"]):
            sampler = optuna.samplers.TPESampler(seed=seed, multivariate=(mode == "multivariate"))
            study = optuna.create_study(direction="minimize", sampler=sampler)
            def objective(trial):
                return f(suggest(trial, fn["space"]))
            study.optimize(objective, n_trials=cfg["evals"])
            res.append(study.best_value - fn["optimum"])
        out[fn["name"] + "/" + mode] = res
print(json.dumps(out))
`;

export async function main(args: string[]): Promise<Record<string, unknown>> {
  const f = flags(args);
  const seeds = numberFlag(f, "seeds", 100);
  const evals = numberFlag(f, "evals", 30);
  const optunaSeeds = numberFlag(f, "optuna-seeds", 40);
  const t0 = performance.now();

  const rows: Record<string, { tpe: number[]; random: number[] }> = {};
  for (const fn of FUNCTIONS) {
    const tpe: number[] = [];
    const random: number[] = [];
    for (let s = 0; s < seeds; s++) {
      tpe.push(searchOnce(fn, s, evals, false));
      random.push(searchOnce(fn, s, evals, true));
    }
    rows[fn.name] = { tpe, random };
  }

  let optuna: Record<string, number[]> | undefined;
  let optunaNote = "";
  const py = f["no-optuna"] ? undefined : findOptuna();
  if (f["no-optuna"]) optunaNote = "skipped (--no-optuna)";
  else if (!py) optunaNote = "skipped: python3 cannot import optuna (Debian: apt-get install python3-optuna)";
  else {
    const cfg = {
      seeds: optunaSeeds,
      evals,
      functions: FUNCTIONS.map((fn) => ({ name: fn.name, space: fn.space, optimum: fn.optimum })),
    };
    const r = spawnSync(py.python, ["-c", PYTHON, JSON.stringify(cfg)], {
      encoding: "utf8",
      maxBuffer: 1 << 26,
    });
    if (r.status === 0) {
      optuna = JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}") as Record<string, number[]>;
      optunaNote = `optuna ${py.version} (${py.python}), ${optunaSeeds} seeds`;
    } else {
      optunaNote = `skipped: the optuna run failed: ${(r.stderr || r.error?.message || "").trim().split("\n").pop()}`;
    }
  }

  console.log(
    `best value found after ${evals} evaluations, minus the optimum (lower is better), mean ± 95% CI`,
  );
  const figures: Record<string, unknown> = { benchmark: "optimizer", evals, seeds, optuna: optunaNote };
  for (const fn of FUNCTIONS) {
    const row = rows[fn.name] as { tpe: number[]; random: number[] };
    const tpe = estimate(row.tpe);
    const random = estimate(row.random);
    const wins = row.tpe.filter((x, i) => x < (row.random[i] as number)).length;
    const parts = [
      `builtin TPE ${show(tpe)}`,
      `random ${show(random)} (TPE better on ${wins}/${seeds} seeds)`,
    ];
    const entry: Record<string, unknown> = {
      tpe: round(tpe.mean),
      tpe_ci: round(tpe.ci, 2),
      random: round(random.mean),
      random_ci: round(random.ci, 2),
      tpe_wins_vs_random: wins,
    };
    if (optuna) {
      for (const mode of ["default", "multivariate"]) {
        const e: Estimate = estimate(optuna[`${fn.name}/${mode}`] ?? []);
        parts.push(`optuna TPE ${mode} ${show(e)}`);
        entry[`optuna_${mode}`] = round(e.mean);
        entry[`optuna_${mode}_ci`] = round(e.ci, 2);
      }
    }
    console.log(`${fn.name.padEnd(15)} ${parts.join("; ")}`);
    figures[fn.name] = entry;
  }
  if (!optuna) console.log(`optuna: ${optunaNote}`);
  figures.seconds = round((performance.now() - t0) / 1000, 3);
  return figures;
}
