/** Optuna from Debian's python3-optuna, for the benchmarks that compare against it. */
import { spawnSync } from "node:child_process";

/** python3 that can import numpy and optuna, and optuna's version; undefined when none can. */
export function findOptuna(): { python: string; version: string } | undefined {
  for (const python of ["python3", "/usr/bin/python3"]) {
    const r = spawnSync(python, ["-c", "import numpy, optuna; print(optuna.__version__)"], {
      encoding: "utf8",
    });
    if (r.status === 0) return { python, version: r.stdout.trim() };
  }
  return undefined;
}

/**
 * Python: `suggest(trial, space)` draws a point of a bench knob space (JSON of
 * src/core/types.ts Knob) with Optuna's trial API, integer and log knobs included.
 */
export const PY_SUGGEST = `
def suggest(trial, space):
    p = {}
    for name, k in space.items():
        if k["int"]:
            p[name] = trial.suggest_int(name, int(k["low"]), int(k["high"]), log=k["log"])
        else:
            p[name] = trial.suggest_float(name, k["low"], k["high"], log=k["log"])
    return p
`;
