import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AutolabError } from "../src/core/errors.ts";
import { loadRoles, parseRole, type Role, validateRoles } from "../src/org/roles.ts";
import { loadProgram } from "../src/program/parse.ts";

const TUNER = `---
name: tuner
description: tunes the knobs
agent: builtin
editable: [train.ts]
weight: 2
min_share: 0.2
---
# Tuner

Tune the knobs.
`;

/** The ROLE_INVALID error `fn` throws. */
function failure(fn: () => unknown): AutolabError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(AutolabError);
    expect((err as AutolabError).code).toBe("ROLE_INVALID");
    return err as AutolabError;
  }
  throw new Error("expected ROLE_INVALID");
}

const PROGRAM = {
  files: { editable: ["train.ts", "model"], protected: ["evaluate.ts"], holdout: [] },
  search: { LR: { low: 0.001, high: 0.1, log: true, int: false } },
};

describe("parseRole", () => {
  it("parses frontmatter and instructions", () => {
    const role = parseRole(TUNER, "org/tuner.md");
    expect(role).toMatchObject({
      name: "tuner",
      path: "org/tuner.md",
      description: "tunes the knobs",
      agent: { backend: "builtin", args: [], env: {} },
      editable: ["train.ts"],
      weight: 2,
      minShare: 0.2,
      instructions: "# Tuner\n\nTune the knobs.",
    });
    expect(role.lines.name).toBe(2);
    expect(role.lines["editable[0]"]).toBe(5);
  });

  it("fills defaults and accepts an agent map like program.md's", () => {
    const role = parseRole(
      "---\nname: explorer\nagent: { backend: claude, model: opus, timeout: 15m, base_url: 'http://127.0.0.1:8000/v1' }\n---\nExplore.",
      "org/explorer.md",
    );
    expect(role.weight).toBe(1);
    expect(role.editable).toBeUndefined();
    expect(role.minShare).toBeUndefined();
    expect(role.agent).toEqual({
      backend: "claude",
      model: "opus",
      timeoutMs: 900_000,
      baseUrl: "http://127.0.0.1:8000/v1",
      args: [],
      env: {},
    });
    expect(parseRole("---\nname: x\n---\n", "x.md").agent.backend).toBe("builtin");
  });

  it("names the file, line and field of a bad value", () => {
    const err = failure(() => parseRole(TUNER.replace("weight: 2", "weight: -1"), "org/tuner.md"));
    expect(err.message).toMatch(/org\/tuner\.md:6 {2}weight: must be greater than zero/);
    expect(err.message).toContain("example:");
    expect(err.hint).toMatch(/docs\/org\.md/);
  });

  it("suggests the agent backend and role keys, not program.md's", () => {
    const err = failure(() => parseRole(TUNER.replace("agent: builtin", "agent: claud"), "org/tuner.md"));
    expect(err.message).toMatch(
      /org\/tuner\.md:4 {2}agent\.backend: "claud" is not one of .* did you mean "claude"\?/,
    );
    const typo = failure(() => parseRole(TUNER.replace("min_share", "minshare"), "org/tuner.md"));
    expect(typo.message).toMatch(
      /org\/tuner\.md:7 {2}minshare: unknown key "minshare" — did you mean "min_share"\?/,
    );
    const other = failure(() => parseRole(TUNER.replace("weight: 2", "budget: 2"), "org/tuner.md"));
    expect(other.message).toMatch(
      /:6 {2}budget: unknown key "budget"; the keys here are: name, description, agent/,
    );
  });

  it("reports every problem at once, in line order", () => {
    const text = "---\nname: Tuner!\nweight: many\neditable: [/etc/passwd]\nmin_share: 2\ncolour: red\n---\n";
    const err = failure(() => parseRole(text, "org/bad.md"));
    expect(err.message).toMatch(/org\/bad\.md: invalid role \(5 problems\)/);
    const lines = [...err.message.matchAll(/org\/bad\.md:(\d+) {2}(\S+):/g)].map((m) => [m[1], m[2]]);
    expect(lines).toEqual([
      ["2", "name"],
      ["3", "weight"],
      ["4", "editable[0]"],
      ["5", "min_share"],
      ["6", "colour"],
    ]);
  });

  it("requires a name, and reports missing or unclosed frontmatter and bad YAML with lines", () => {
    expect(failure(() => parseRole("---\nweight: 1\n---\n", "r.md")).message).toMatch(
      /r\.md:2 {2}name: is required/,
    );
    expect(failure(() => parseRole("# no frontmatter\n", "r.md")).message).toMatch(
      /r\.md:1 {2}has no frontmatter/,
    );
    expect(failure(() => parseRole("---\nname: a\n", "r.md")).message).toMatch(/r\.md:1 {2}has no closing/);
    expect(failure(() => parseRole("---\nname: a\nagent: [claude\n---\n", "r.md")).message).toMatch(
      /r\.md:\d+:\d+ {2}YAML:/,
    );
  });
});

describe("loadRoles", () => {
  function orgDir(files: Record<string, string>): string {
    const dir = join(mkdtempSync(join(tmpdir(), "autolab-org-")), "org");
    mkdirSync(dir);
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
    return dir;
  }

  it("reads every .md in file-name order; a missing directory is an empty org", () => {
    const dir = orgDir({
      "b.md": "---\nname: bravo\n---\nB",
      "a.md": "---\nname: alpha\n---\nA",
      "notes.txt": "ignored",
    });
    expect(loadRoles(dir).map((r) => r.name)).toEqual(["alpha", "bravo"]);
    expect(loadRoles(join(dir, "nope"))).toEqual([]);
  });

  it("names the file of a bad role, and both files of a duplicate name", () => {
    const bad = orgDir({ "a.md": "---\nname: alpha\nweight: x\n---\n" });
    expect(failure(() => loadRoles(bad)).message).toContain(`${join(bad, "a.md")}:3  weight:`);
    const dup = orgDir({ "a.md": "---\nname: same\n---\n", "b.md": "---\n\nname: same\n---\n" });
    const err = failure(() => loadRoles(dup));
    expect(err.message).toContain(
      `${join(dup, "b.md")}:3  name: role "same" is already defined in ${join(dup, "a.md")}:2`,
    );
  });

  it("accepts the example org of tiny-lm, which fits its program", () => {
    const roles = loadRoles("examples/tiny-lm/org");
    expect(roles.map((r) => [r.name, r.agent.backend])).toEqual([
      ["critic", "llm"],
      ["explorer", "claude"],
      ["tuner", "builtin"],
    ]);
    for (const r of roles) expect(r.instructions.length).toBeGreaterThan(50);
    expect(() => validateRoles(roles, loadProgram("examples/tiny-lm"))).not.toThrow();
  });
});

describe("validateRoles", () => {
  const role = (text: string): Role => parseRole(text, "org/r.md");

  it("accepts editable subsets, files inside an editable directory, and no editable at all", () => {
    const roles = [
      role("---\nname: a\neditable: [train.ts, ./model/layers.ts]\n---\n"),
      role("---\nname: b\nagent: claude\n---\n"),
    ];
    expect(() => validateRoles(roles, PROGRAM)).not.toThrow();
  });

  it("rejects a file the program does not let anyone edit, naming the line and entry", () => {
    const r = role("---\nname: a\neditable:\n  - train.ts\n  - evaluate.ts\n---\n");
    const err = failure(() => validateRoles([r], PROGRAM));
    expect(err.message).toMatch(
      /org\/r\.md:5 {2}editable\[1\]: "evaluate\.ts" is not editable in program\.md \(files\.editable: train\.ts, model\)/,
    );
  });

  it("rejects the builtin agent when program.md has no search knobs", () => {
    const r = role("---\nname: tuner\nagent: builtin\n---\n");
    const err = failure(() => validateRoles([r], { ...PROGRAM, search: {} }));
    expect(err.message).toMatch(/org\/r\.md:3 {2}agent: the builtin agent tunes program\.md's search: knobs/);
  });

  it("rejects least shares that add up to more than 1", () => {
    const a = parseRole("---\nname: a\nmin_share: 0.6\n---\n", "org/a.md");
    const b = parseRole("---\nname: b\n\nmin_share: 0.5\n---\n", "org/b.md");
    const err = failure(() => validateRoles([a, b], PROGRAM));
    expect(err.message).toMatch(
      /org\/b\.md:4 {2}min_share: the roles' min_share add up to 1\.1 \(a 0\.6, b 0\.5\)/,
    );
  });
});
