// The tiny-lm example end to end: prepare, a 3-second training run, evaluate, in a copy of
// the example with the repository's node_modules linked in (as `autolab init` does).
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, expect, it } from "vitest";
import { loadProgram } from "../src/program/index.ts";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..");
const EXAMPLE = join(REPO, "examples", "tiny-lm");
const work = mkdtempSync(join(tmpdir(), "tiny-lm-test-"));
const dir = join(work, "tiny-lm");

afterAll(() => rmSync(work, { recursive: true, force: true }));

function run(script: string, env: Record<string, string> = {}) {
  const res = spawnSync(process.execPath, [script], {
    cwd: dir,
    env: { ...process.env, ...env },
    encoding: "utf8",
    timeout: 30_000,
  });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

function metric(stdout: string, name: string): number {
  const m = new RegExp(`^${name}:\\s*(\\S+)$`, "m").exec(stdout);
  expect(m, `${name} in:\n${stdout}`).not.toBeNull();
  return Number(m?.[1]);
}

it("prepares, trains within its budget and evaluates", () => {
  cpSync(EXAMPLE, dir, {
    recursive: true,
    filter: (p) => !/(^|\/)(node_modules|data|out)(\/|$)/.test(p.slice(EXAMPLE.length)),
  });
  symlinkSync(join(REPO, "node_modules"), join(dir, "node_modules"), "dir");

  const prep = run("prepare.ts");
  expect(prep.status, prep.stderr).toBe(0);
  for (const f of ["train.txt", "val.txt", "test.txt", "vocab.json"])
    expect(existsSync(join(dir, "data", f))).toBe(true);
  const vocab = JSON.parse(readFileSync(join(dir, "data", "vocab.json"), "utf8")) as { chars: string[] };
  const val = readFileSync(join(dir, "data", "val.txt"));
  // idempotent: a second run leaves the data as it was
  const again = run("prepare.ts");
  expect(again.status, again.stderr).toBe(0);
  expect(readFileSync(join(dir, "data", "val.txt")).equals(val)).toBe(true);

  // It stops itself at its budget: a train.ts that ignored it would be killed by run()'s 30 s
  // limit (status null) instead of exiting 0 with its summary.
  const train = run("train.ts", { AUTOLAB_BUDGET_S: "3", AUTOLAB_SEED: "1" });
  expect(train.status, train.stderr).toBe(0);
  expect(metric(train.stdout, "training_seconds")).toBeGreaterThan(0);
  expect(train.stdout).toMatch(/^METRIC train_loss=\d/m);
  expect(metric(train.stdout, "steps")).toBeGreaterThan(0);
  expect(Number.isFinite(metric(train.stdout, "train_loss"))).toBe(true);

  const ev = run("evaluate.ts");
  expect(ev.status, ev.stderr).toBe(0);
  const uniform = Math.log2(vocab.chars.length);
  for (const name of ["val_bpb", "test_bpb"]) {
    const v = metric(ev.stdout, name);
    expect(Number.isFinite(v)).toBe(true);
    expect(v).toBeGreaterThan(0);
    expect(v).toBeLessThan(uniform);
  }
});

it("evaluate fails clearly without a checkpoint", () => {
  rmSync(join(dir, "out"), { recursive: true, force: true });
  const ev = run("evaluate.ts");
  expect(ev.status).not.toBe(0);
  expect(ev.stderr).toMatch(/no checkpoint/);
  expect(ev.stdout).not.toMatch(/val_bpb/);
});

it("program.md parses, and every search knob is a `const NAME = value;` line of train.ts inside its range", () => {
  const program = loadProgram(EXAMPLE);
  expect(program.objective).toEqual({ metric: "val_bpb", direction: "minimize" });
  const train = readFileSync(join(EXAMPLE, "train.ts"), "utf8");
  const knobs = Object.entries(program.search);
  expect(knobs.length).toBeGreaterThanOrEqual(4);
  for (const [name, knob] of knobs) {
    if ("choices" in knob) throw new Error(`${name}: tiny-lm has numeric knobs only`);
    const lines = train.match(new RegExp(`^const ${name} = (.+);$`, "gm")) ?? [];
    expect(lines, name).toHaveLength(1);
    const value = Number(/= (.+);$/.exec(lines[0] as string)?.[1]);
    expect(value, name).toBeGreaterThanOrEqual(knob.low);
    expect(value, name).toBeLessThanOrEqual(knob.high);
  }
});
