import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isAutolabError } from "../src/core/errors.ts";
import { loadSuite } from "../src/learn/suite.ts";

function dir(): string {
  const d = mkdtempSync(join(tmpdir(), "autolab-suite-"));
  for (const p of ["a", "b"]) {
    mkdirSync(join(d, p));
    writeFileSync(join(d, p, "program.md"), "---\nname: x\n---\n");
  }
  return d;
}

const GOOD = `programs:
  - { path: a, split: tuning }
  - { path: b/program.md, split: held-out }
configurations:
  single: { org: false, acceptance: noise }
  org: { org: { roles: org/, policy: bandit }, slots: 2 }
budget: { experiments: 4 }
seeds: 2
layers: ["org vs single"]
`;

function problem(d: string, text: string, name = "suite.yaml") {
  writeFileSync(join(d, name), text);
  try {
    loadSuite(join(d, name));
  } catch (err) {
    if (isAutolabError(err)) return err;
    throw err;
  }
  throw new Error("the suite was accepted");
}

describe("bench suite files", () => {
  it("reads a suite: programs by split, configurations, seeds, layers", () => {
    const d = dir();
    writeFileSync(join(d, "suite.yaml"), GOOD);
    const s = loadSuite(join(d, "suite.yaml"));
    expect(s.programs.map((p) => [p.name, p.split])).toEqual([
      ["a", "tuning"],
      ["b", "held-out"],
    ]);
    expect(s.programs[1]?.programFile).toBe(join(d, "b", "program.md"));
    expect(s.configurations.map((c) => c.name)).toEqual(["single", "org"]);
    expect(s.seeds).toEqual([1, 2]);
    expect(s.layers).toEqual([{ label: "org vs single", candidate: "org", baseline: "single" }]);
    expect(s.order).toBe("grid");
    // The same suite as markdown frontmatter.
    writeFileSync(join(d, "suite.md"), `---\n${GOOD}order: curriculum\n---\n# My bench\n`);
    const m = loadSuite(join(d, "suite.md"));
    expect(m.order).toBe("curriculum");
    expect(m.hash).toBe(s.hash); // order does not change what a cell computes
  });

  it("a program that does not exist is named, with the fix", () => {
    const d = dir();
    const e = problem(d, GOOD.replace("path: a,", "path: nope,"));
    expect(e.code).toBe("BENCH_PROGRAM_MISSING");
    expect(e.message).toContain('"nope"');
    expect(e.message).toContain("programs.0");
    expect(e.hint).toMatch(/program's directory/);
  });

  it("a bad field names the field and shows how to write it", () => {
    const d = dir();
    const e = problem(d, GOOD.replace("acceptance: noise", "acceptance: lenient"));
    expect(e.code).toBe("BENCH_SUITE_INVALID");
    expect(e.message).toContain("configurations.single.acceptance");
    expect(e.hint).toContain("configurations:");
    const s = problem(d, GOOD.replace("split: tuning", "split: train"));
    expect(s.message).toContain("programs.0.split");
    const b = problem(d, GOOD.replace("budget: { experiments: 4 }", "budget: {}"));
    expect(b.message).toMatch(/budget: needs experiments, trials or time/);
    const t = problem(d, GOOD.replace("budget: { experiments: 4 }", "budget: { time: soon }"));
    expect(t.message).toContain("budget.time");
    const u = problem(d, GOOD.replace("seeds: 2", "seeds: 2\nsede: 3"));
    expect(u.message).toContain("sede");
  });

  it("a program's directory name that cannot name a cell directory or a report row needs a name:", () => {
    const d = dir();
    mkdirSync(join(d, "<img src=x>"));
    writeFileSync(join(d, "<img src=x>", "program.md"), "---\nname: x\n---\n");
    const e = problem(d, GOOD.replace("path: a,", 'path: "<img src=x>",'));
    expect(e.message).toContain("programs.0.name");
    writeFileSync(join(d, "suite.yaml"), GOOD.replace("path: a,", 'path: "<img src=x>", name: safe,'));
    expect(loadSuite(join(d, "suite.yaml")).programs[0]?.name).toBe("safe");
  });

  it("a layer must compare two configurations of the suite", () => {
    const d = dir();
    const e = problem(d, GOOD.replace('"org vs single"', '"org vs solo"'));
    expect(e.message).toContain("layers.0");
    expect(e.message).toContain('"solo" is not a configuration');
    const f = problem(d, GOOD.replace('"org vs single"', '"org beats single"'));
    expect(f.message).toMatch(/not "<configuration> vs <configuration>"/);
  });

  it("a missing suite file, a missing variant, and broken YAML are clear errors", () => {
    const d = dir();
    expect(() => loadSuite(join(d, "none.yaml"))).toThrow(/no suite file/);
    const v = problem(d, GOOD.replace("acceptance: noise", "program_md: variants/b.md"));
    expect(v.code).toBe("BENCH_PROGRAM_MISSING");
    expect(v.message).toContain("configurations.single.program_md");
    const y = problem(d, "programs: [\n");
    expect(y.message).toMatch(/not valid YAML/);
    const md = problem(d, "# no frontmatter\n", "suite.md");
    expect(md.message).toMatch(/no YAML frontmatter/);
  });
});
