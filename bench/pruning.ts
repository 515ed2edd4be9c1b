/**
 * Learning-curve pruning on simulated training runs with known truth.
 *
 * A configuration (u1 ~ learning rate, u2 ~ capacity, uniform in [0, 1]²) trains along
 *   loss(t) = a + (s0 − a)·exp(−r·t),  t ∈ [0, 1] the elapsed fraction of the budget,
 * with r = 1 + 9·u1 (a higher rate converges faster) and a = 1 + 2(u1 − 0.4)² + 1.5(u2 − 0.6)²
 * (too high a rate ends worse): fast configurations look best early and are overtaken, so the
 * curves cross as real ones do. Each of `steps` progress values carries Gaussian noise σp; the
 * objective is loss(1) measured with noise σf.
 *
 * Per seed, random search evaluates `configs` configurations in order, twice: every trial run
 * to the end, and with the pruner (src/trust/pruner.ts) against the current best's curve.
 * Figures: compute saved, and the true final loss of the configuration each way picks.
 *
 *   npm run bench -- pruning [--seeds=200] [--configs=50] [--steps=100] [--sigma-progress=0.05] [--sigma-final=0.02]
 *     [--z=5] [--warmup=0.3] [--patience=2]
 */
import { createRng, mixSeed, type Rng } from "../src/agents/builtin/rng.ts";
import { type Curve, createPruner, type PrunerOptions } from "../src/trust/pruner.ts";
import { estimate, flags, numberFlag, round, show } from "./_stats.ts";

interface Config {
  r: number;
  a: number;
}
const S0 = 4;

function config(rng: Rng): Config {
  const u1 = rng.next();
  const u2 = rng.next();
  return { r: 1 + 9 * u1, a: 1 + 2 * (u1 - 0.4) ** 2 + 1.5 * (u2 - 0.6) ** 2 };
}

const lossAt = (c: Config, t: number) => c.a + (S0 - c.a) * Math.exp(-c.r * t);

interface Outcome {
  /** Steps run, over all configurations. */
  steps: number;
  /** True final loss of the configuration picked (best measured final value). */
  pickedTrue: number;
  picked: number;
  pruned: number;
}

function search(
  configs: Config[],
  noise: number[][],
  finals: number[],
  steps: number,
  prune: PrunerOptions | undefined,
): Outcome {
  let best: { i: number; measured: number; curve: Curve } | undefined;
  let used = 0;
  let pruned = 0;
  configs.forEach((c, i) => {
    const pruner = best && prune ? createPruner(best.curve, prune) : undefined;
    const curve: [number, number][] = [];
    for (let k = 1; k <= steps; k++) {
      const t = k / steps;
      const y = lossAt(c, t) + ((noise[i] as number[])[k - 1] as number);
      curve.push([t, y]);
      used++;
      if (pruner?.observe(t, y).prune) {
        pruned++;
        return;
      }
    }
    const measured = lossAt(c, 1) + (finals[i] as number);
    if (!best || measured < best.measured) best = { i, measured, curve };
  });
  const i = best?.i ?? 0;
  return { steps: used, pickedTrue: lossAt(configs[i] as Config, 1), picked: i, pruned };
}

export async function main(args: string[]): Promise<Record<string, unknown>> {
  const f = flags(args);
  const seeds = numberFlag(f, "seeds", 200);
  const n = numberFlag(f, "configs", 50);
  const steps = numberFlag(f, "steps", 100);
  const sigmaP = numberFlag(f, "sigma-progress", 0.05);
  const sigmaF = numberFlag(f, "sigma-final", 0.02);
  const options: PrunerOptions = {
    direction: "minimize",
    ...(f.z ? { z: numberFlag(f, "z", 3) } : {}),
    ...(f.warmup ? { warmup: numberFlag(f, "warmup", 0.3) } : {}),
    ...(f.patience ? { patience: numberFlag(f, "patience", 2) } : {}),
  };
  const t0 = performance.now();

  const saved: number[] = [];
  const diff: number[] = [];
  const same: number[] = [];
  const prunedShare: number[] = [];
  const oracleLost: number[] = [];
  const trueFull: number[] = [];
  const truePruned: number[] = [];
  for (let s = 0; s < seeds; s++) {
    const rng = createRng(mixSeed(s, 11));
    const configs = Array.from({ length: n }, () => config(rng));
    const noise = configs.map(() => Array.from({ length: steps }, () => sigmaP * rng.normal()));
    const finals = configs.map(() => sigmaF * rng.normal());
    const full = search(configs, noise, finals, steps, undefined);
    const withPruning = search(configs, noise, finals, steps, options);
    saved.push(1 - withPruning.steps / full.steps);
    diff.push(withPruning.pickedTrue - full.pickedTrue);
    same.push(withPruning.picked === full.picked ? 1 : 0);
    prunedShare.push(withPruning.pruned / n);
    trueFull.push(full.pickedTrue);
    truePruned.push(withPruning.pickedTrue);
    // Was the truly best configuration pruned away?
    const trueBest = configs.reduce((b, c, i) => (lossAt(c, 1) < lossAt(configs[b] as Config, 1) ? i : b), 0);
    oracleLost.push(withPruning.picked !== trueBest && full.picked === trueBest ? 1 : 0);
  }
  const savedE = estimate(saved);
  const diffE = estimate(diff);
  const figures = {
    benchmark: "pruning",
    seeds,
    configs: n,
    steps,
    sigma_progress: sigmaP,
    sigma_final: sigmaF,
    warmup: options.warmup ?? 0.3,
    z: options.z ?? 5,
    patience: options.patience ?? 2,
    compute_saved_pct: round(100 * savedE.mean, 3),
    compute_saved_ci_pct: round(100 * savedE.ci, 2),
    pruned_share_pct: round(100 * estimate(prunedShare).mean, 3),
    final_true_full: round(estimate(trueFull).mean),
    final_true_pruned: round(estimate(truePruned).mean),
    final_true_diff: round(diffE.mean),
    final_true_diff_ci: round(diffE.ci, 2),
    final_true_diff_in_sigma_final: round(diffE.mean / sigmaF, 2),
    same_pick_pct: round(100 * estimate(same).mean, 3),
    true_best_lost_pct: round(100 * estimate(oracleLost).mean, 3),
    seconds: round((performance.now() - t0) / 1000, 3),
  };
  console.log(
    `${seeds} seeds × ${n} configurations, ${steps} progress points each (σp ${sigmaP}), final value noise σf ${sigmaF}`,
  );
  console.log(
    `  compute saved ${show(savedE, 3, 100)}% (target ≥ 40%); ${figures.pruned_share_pct}% of trials pruned`,
  );
  console.log(
    `  true final loss of the pick: all to the end ${figures.final_true_full}, with pruning ${figures.final_true_pruned}; difference ${show(diffE, 3)} = ${figures.final_true_diff_in_sigma_final} σf (target: within noise, |diff| ≤ σf)`,
  );
  console.log(
    `  same configuration picked in ${figures.same_pick_pct}% of seeds; the true best lost to pruning in ${figures.true_best_lost_pct}%`,
  );
  return figures;
}
