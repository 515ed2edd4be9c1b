/**
 * The orchestrator decides which role proposes next. Two policies:
 *
 * - `round-robin` (the baseline): smooth weighted round-robin over the roles' weights; with
 *   equal weights it cycles through the roles in order.
 * - `bandit`: Thompson sampling on each role's observed value = improvement per unit of
 *   compute. A role's value is the ratio Σ improvement / Σ compute over its recorded outcomes,
 *   with old evidence discounted (`discount` per recorded outcome, so a role that has exhausted
 *   its ideas loses share) and shrunk towards the pooled value of all roles (`priorStrength`
 *   pseudo-outcomes). Its uncertainty is the delta-method variance of that ratio; one draw per
 *   role from N(value, temperature² · variance), the highest draw proposes.
 *
 * Both policies keep an exploration floor: every role gets at least `max(floor, minShare)` of
 * the proposals (forced when it falls more than one proposal behind), so no role starves and
 * the org cannot collapse onto one role. Everything is deterministic for a given seed and the
 * same sequence of next()/record() calls, so a resumed run can rebuild the orchestrator by
 * replaying the notebook.
 */
import { createRng } from "../agents/builtin/rng.ts";

export type OrchestratorPolicy = "bandit" | "round-robin";

export interface OrchestratorRole {
  name: string;
  /** Relative share under round-robin; ties under the bandit. Default 1. */
  weight?: number;
  /** This role's own least share of proposals, on top of the common floor. */
  minShare?: number;
}

export interface OrchestratorOptions {
  /** Role names or roles (a Role from roles.ts fits). At least one. */
  roles: readonly (string | OrchestratorRole)[];
  policy: OrchestratorPolicy;
  seed?: number;
  /** Least share of proposals of every role, 0 ≤ floor ≤ 1/roles. Default 0.2 (capped at 1/roles). */
  floor?: number;
  /** Bandit: weight kept by old evidence at each recorded outcome (1 = never forget). Default 0.93. */
  discount?: number;
  /** Bandit: pseudo-outcomes at the pooled value that each role's estimate starts from. Default 1. */
  priorStrength?: number;
  /** Bandit: scale of the posterior draws (1 = Thompson sampling; 0 = greedy). Default 0.25. */
  temperature?: number;
}

/** What one proposal of a role achieved. */
export interface Outcome {
  /** Improvement of the objective it brought (0 for a discarded or crashed experiment). */
  improvement: number;
  /** Compute it cost (for example trial seconds, or GPU-seconds); ≥ 0. */
  compute: number;
}

export interface RoleCredit {
  role: string;
  /** Proposals handed to this role by next(). */
  proposals: number;
  /** Outcomes recorded for it. */
  results: number;
  /** Share of all proposals. */
  share: number;
  improvement: number;
  compute: number;
  /** improvement / compute over all its outcomes (0 before any compute). */
  value: number;
  /** The bandit's current (discounted, shrunk) estimate of its value; value under round-robin. */
  estimate: number;
}

export interface Orchestrator {
  readonly policy: OrchestratorPolicy;
  /** The role that proposes next (counted as one proposal of that role). */
  next(): string;
  /** Records the outcome of one proposal of `role`. Outcomes may arrive in any order. */
  record(role: string, outcome: Outcome): void;
  /** Per-role counts and totals, in the order the roles were given. */
  credit(): RoleCredit[];
}

/** Defaults: the knobs chosen on the tuning tasks of bench/orchestrator.ts (docs/benchmarks.md). */
export const DEFAULT_FLOOR = 0.2;
export const DEFAULT_DISCOUNT = 0.93;
export const DEFAULT_PRIOR_STRENGTH = 1;
export const DEFAULT_TEMPERATURE = 0.25;

interface Arm {
  name: string;
  weight: number;
  floor: number;
  proposals: number;
  results: number;
  improvement: number;
  compute: number;
  /** Round-robin's running credit (smooth weighted round-robin). */
  current: number;
  // Discounted sums for the bandit: count, Σi, Σc, Σi², Σi·c, Σc².
  n: number;
  si: number;
  sc: number;
  sii: number;
  sic: number;
  scc: number;
}

function check(cond: boolean, message: string): void {
  if (!cond) throw new RangeError(`createOrchestrator: ${message}`);
}

export function createOrchestrator(options: OrchestratorOptions): Orchestrator {
  const policy = options.policy;
  check(policy === "bandit" || policy === "round-robin", `unknown policy ${JSON.stringify(policy)}`);
  check(options.roles.length > 0, "needs at least one role");
  const k = options.roles.length;
  const floor = Math.min(options.floor ?? DEFAULT_FLOOR, 1 / k);
  check(floor >= 0, `floor must be ≥ 0, got ${options.floor}`);
  const discount = options.discount ?? DEFAULT_DISCOUNT;
  check(discount > 0 && discount <= 1, `discount must be in (0, 1], got ${discount}`);
  const priorStrength = options.priorStrength ?? DEFAULT_PRIOR_STRENGTH;
  check(priorStrength > 0, `priorStrength must be > 0, got ${priorStrength}`);
  const temperature = options.temperature ?? DEFAULT_TEMPERATURE;
  check(temperature >= 0, `temperature must be ≥ 0, got ${temperature}`);
  const random = createRng(options.seed ?? 0);

  const arms: Arm[] = options.roles.map((r) => {
    const role = typeof r === "string" ? { name: r } : r;
    const weight = role.weight ?? 1;
    check(weight > 0 && Number.isFinite(weight), `role ${role.name}: weight must be > 0`);
    return {
      name: role.name,
      weight,
      floor: Math.max(floor, role.minShare ?? 0),
      proposals: 0,
      results: 0,
      improvement: 0,
      compute: 0,
      current: 0,
      n: 0,
      si: 0,
      sc: 0,
      sii: 0,
      sic: 0,
      scc: 0,
    };
  });
  const byName = new Map(arms.map((a) => [a.name, a]));
  check(byName.size === k, "role names must be distinct");
  // Floors that add up to more than 1 are scaled down to fit (the bandit then has no freedom).
  const floorSum = arms.reduce((s, a) => s + a.floor, 0);
  if (floorSum > 1) for (const a of arms) a.floor /= floorSum;
  const totalWeight = arms.reduce((s, a) => s + a.weight, 0);
  let total = 0;

  /** The role furthest behind its floor by more than one proposal, if any. */
  function starving(): Arm | undefined {
    let worst: Arm | undefined;
    let worstDeficit = 1;
    for (const a of arms) {
      const deficit = a.floor * (total + 1) - a.proposals;
      if (deficit > worstDeficit) {
        worst = a;
        worstDeficit = deficit;
      }
    }
    return worst;
  }

  function roundRobin(): Arm {
    let best = arms[0] as Arm;
    for (const a of arms) {
      a.current += a.weight;
      if (a.current > best.current) best = a;
    }
    best.current -= totalWeight;
    return best;
  }

  function pooled(): { value: number; compute: number; variance: number } {
    let n = 0;
    let si = 0;
    let sc = 0;
    for (const a of arms) {
      n += a.n;
      si += a.si;
      sc += a.sc;
    }
    const value = sc > 0 ? si / sc : 0;
    let residual = 0;
    for (const a of arms) residual += a.sii - 2 * value * a.sic + value * value * a.scc;
    // Per outcome: mean compute and residual variance of improvement around value·compute.
    return { value, compute: n > 0 ? sc / n : 1, variance: n > 1 ? Math.max(0, residual) / (n - 1) : 0 };
  }

  /** The bandit's estimate of an arm's value and the variance of that estimate. */
  function posterior(a: Arm, prior: ReturnType<typeof pooled>): { mean: number; variance: number } {
    const c0 = priorStrength * prior.compute;
    const i = a.si + prior.value * c0;
    const c = a.sc + c0;
    const mean = i / c;
    const residual = Math.max(0, a.sii - 2 * mean * a.sic + mean * mean * a.scc);
    const variance = (residual + priorStrength * prior.variance) / (c * c);
    return { mean, variance };
  }

  function thompson(): Arm {
    // Every role proposes once before values are compared.
    const fresh = arms.find((a) => a.proposals === 0);
    if (fresh) return fresh;
    const prior = pooled();
    let best: Arm[] = [];
    let bestDraw = Number.NEGATIVE_INFINITY;
    for (const a of arms) {
      const p = posterior(a, prior);
      const draw = p.mean + temperature * Math.sqrt(p.variance) * random.normal();
      if (draw > bestDraw) {
        best = [a];
        bestDraw = draw;
      } else if (draw === bestDraw) {
        best.push(a);
      }
    }
    if (best.length === 1) return best[0] as Arm;
    // No information to tell them apart (nothing improved yet): choose by weight.
    const w = best.reduce((s, a) => s + a.weight, 0);
    let u = random.next() * w;
    for (const a of best) {
      u -= a.weight;
      if (u < 0) return a;
    }
    return best[best.length - 1] as Arm;
  }

  return {
    policy,
    next() {
      const arm = starving() ?? (policy === "bandit" ? thompson() : roundRobin());
      arm.proposals++;
      total++;
      return arm.name;
    },
    record(role, outcome) {
      const arm = byName.get(role);
      if (arm === undefined) throw new RangeError(`orchestrator: unknown role ${JSON.stringify(role)}`);
      const { improvement, compute } = outcome;
      if (!Number.isFinite(improvement) || !Number.isFinite(compute) || compute < 0) {
        throw new RangeError(
          `orchestrator: outcome of ${role} needs a finite improvement and compute ≥ 0, got ${improvement}, ${compute}`,
        );
      }
      arm.results++;
      arm.improvement += improvement;
      arm.compute += compute;
      for (const a of arms) {
        a.n *= discount;
        a.si *= discount;
        a.sc *= discount;
        a.sii *= discount;
        a.sic *= discount;
        a.scc *= discount;
      }
      arm.n += 1;
      arm.si += improvement;
      arm.sc += compute;
      arm.sii += improvement * improvement;
      arm.sic += improvement * compute;
      arm.scc += compute * compute;
    },
    credit() {
      const prior = pooled();
      return arms.map((a) => ({
        role: a.name,
        proposals: a.proposals,
        results: a.results,
        share: total > 0 ? a.proposals / total : 0,
        improvement: a.improvement,
        compute: a.compute,
        value: a.compute > 0 ? a.improvement / a.compute : 0,
        estimate:
          policy === "bandit" ? posterior(a, prior).mean : a.compute > 0 ? a.improvement / a.compute : 0,
      }));
    },
  };
}
