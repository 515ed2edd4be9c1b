import { spawnSync } from "node:child_process";

/**
 * Slurm for tests: the single-node cluster .ci/start-slurm.sh starts. Missing, the Slurm tests
 * skip with the reason, except where AUTOLAB_REQUIRE_SLURM=1 (CI): there they run and fail.
 */
export function slurmProblem(): string | undefined {
  const v = spawnSync("sbatch", ["--version"], { encoding: "utf8" });
  if (v.error || v.status !== 0) return "sbatch is not installed (run .ci/start-slurm.sh as root)";
  const ping = spawnSync("scontrol", ["ping"], { encoding: "utf8", timeout: 20_000 });
  if (ping.status !== 0 || !/ is UP\b/.test(ping.stdout))
    return `slurmctld does not answer (scontrol ping: ${(ping.stdout + ping.stderr).trim() || "no output"})`;
  return undefined;
}

export const SLURM_REQUIRED = process.env.AUTOLAB_REQUIRE_SLURM === "1";
