/**
 * Code reaches a worker as git bundles stored in the fleet's database (`fleet_bundles`, keyed
 * by the bundle's sha256, stored once). The coordinator bundles a commit (the run's base commit
 * whole, a candidate as the commits after the base); the worker fetches each bundle, checks its
 * hash before git reads a byte of it, and fetches it into its cache repository.
 */
import { createHash, randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import { git, gitRaw } from "../workspace/git.ts";

/** One bundle of a job: its hash and the commit it brings. */
export interface BundleRef {
  sha256: string;
  commit: string;
}

/** A bundle that must not be used: the job fails with this reason, the trial never runs. */
export class BundleRefused extends Error {}

export function sha256Hex(data: Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

const REF_PREFIX = "refs/autolab-fleet";

/**
 * Bundles `commit` of the repository at `root` (only the commits after `base` when `base` is an
 * ancestor, else its whole history) and stores it; returns its reference. The temporary ref is
 * removed again: the user's repository keeps nothing of it.
 */
export async function storeBundle(
  pool: pg.Pool,
  schema: string,
  root: string,
  commit: string,
  base?: string,
): Promise<BundleRef> {
  const ref = `${REF_PREFIX}/${commit}`;
  const file = join(tmpdir(), `autolab-bundle-${randomBytes(6).toString("hex")}.bundle`);
  // A bare repository (the hub's) is named explicitly: git's safe.bareRepository=explicit refuses
  // to find one from the working directory.
  const at = isBare(root) ? [`--git-dir=${root}`] : [];
  await git(root, [...at, "update-ref", ref, commit]);
  try {
    const thin =
      base !== undefined &&
      base !== commit &&
      (await gitRaw(root, [...at, "merge-base", "--is-ancestor", base, commit])).code === 0;
    await git(root, [...at, "bundle", "create", "-q", file, ref, ...(thin ? [`^${base}`] : [])]);
    const data = await readFile(file);
    const hash = sha256Hex(data);
    await pool.query(
      `INSERT INTO ${schema}.fleet_bundles (sha256, data) VALUES ($1, $2) ON CONFLICT (sha256) DO NOTHING`,
      [hash, data],
    );
    return { sha256: hash, commit };
  } finally {
    await gitRaw(root, [...at, "update-ref", "-d", ref]);
    await rm(file, { force: true });
  }
}

/**
 * Brings the bundles' commits into the cache repository at `cacheRoot`, skipping those it has.
 * A bundle that is missing or whose bytes do not hash to its name is refused (BundleRefused).
 */
export async function fetchBundles(
  pool: pg.Pool,
  schema: string,
  cacheRoot: string,
  bundles: BundleRef[],
): Promise<void> {
  for (const b of bundles) {
    if (await hasCommit(cacheRoot, b.commit)) continue;
    const row = await pool.query<{ data: Buffer }>(
      `SELECT data FROM ${schema}.fleet_bundles WHERE sha256 = $1`,
      [b.sha256],
    );
    const data = row.rows[0]?.data;
    if (!data)
      throw new BundleRefused(`bundle ${b.sha256} is not in the fleet's database; the trial was not run`);
    const actual = sha256Hex(data);
    if (actual !== b.sha256) {
      throw new BundleRefused(
        `bundle ${b.sha256} in the fleet's database is corrupted: its content hashes to ${actual}; the trial was not run`,
      );
    }
    const file = join(tmpdir(), `autolab-bundle-${randomBytes(6).toString("hex")}.bundle`);
    await writeFile(file, data);
    try {
      const got = await gitRaw(cacheRoot, [
        "fetch",
        "-q",
        "--no-tags",
        file,
        `+${REF_PREFIX}/*:${REF_PREFIX}/*`,
      ]);
      if (got.code !== 0) {
        throw new BundleRefused(
          `bundle ${b.sha256} could not be fetched: ${got.stderr.trim().split("\n").at(-1) ?? ""}; the trial was not run`,
        );
      }
    } finally {
      await rm(file, { force: true });
    }
    if (!(await hasCommit(cacheRoot, b.commit))) {
      throw new BundleRefused(`bundle ${b.sha256} does not hold commit ${b.commit}; the trial was not run`);
    }
  }
}

/** A bare repository: no `.git` inside, git's own files at the top. */
function isBare(root: string): boolean {
  return (
    !existsSync(join(root, ".git")) && existsSync(join(root, "HEAD")) && existsSync(join(root, "objects"))
  );
}

async function hasCommit(root: string, commit: string): Promise<boolean> {
  return (await gitRaw(root, ["cat-file", "-e", `${commit}^{commit}`])).code === 0;
}
