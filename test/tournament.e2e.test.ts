import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { incumbentOf, readVariant, runTournament, type Variant } from "../src/learn/tournament.ts";
import { tournamentSummary, writeTournamentReport } from "../src/learn/tournament-report.ts";
import { startFakeModel } from "./fake-model/server.ts";
import { follower } from "./helpers/follower.ts";
import { runCli, spawnCli } from "./helpers/toy-project.ts";
import { git, valueProject } from "./helpers/value-project.ts";

describe("autolab tournament", () => {
  it("ranks variants of the instructions under the same seeds and budget; reuses cells it has run", async () => {
    const project = valueProject();
    const work = mkdtempSync(join(tmpdir(), "autolab-tournament-"));
    const program = join(project, "program.md");
    writeFileSync(join(work, "sharp.md"), "Try X = 3 first, it is the known good value.\nTry X = 3\n");
    writeFileSync(join(work, "mild.md"), "Try X = 4\n");
    const inc = incumbentOf(program);
    expect(inc.body).toBe("Lower X.");
    const variants: Variant[] = [inc];
    variants.push(readVariant(program, join(work, "sharp.md"), variants));
    variants.push(readVariant(program, join(work, "mild.md"), variants));
    const out = join(work, "out");
    const lines: string[] = [];
    const opts = {
      program,
      variants,
      seeds: [1, 2],
      budget: { experiments: 2 },
      remeasure: 1,
      out,
      agent: "follower",
      agents: { follower },
      parallel: 3, // the three variants' cells share three places
      onLine: (l: string) => lines.push(l),
    };
    // An uncommitted edit is not in the cells (they clone the last commit): said, not silently used.
    writeFileSync(join(project, "value.mjs"), "export const X = 1; // not committed\n");
    const r = await runTournament(opts);
    expect(lines.join("\n")).toMatch(/warning: 1 uncommitted change \(value\.mjs\) is not in the cells/);
    expect(r.complete).toBe(true);
    expect(r.cells).toHaveLength(6);
    expect(r.standings.standings.map((s) => [s.variant, s.mean])).toEqual([
      ["sharp", 40],
      ["mild", 20],
      ["incumbent", 0],
    ]);
    expect(r.standings.winner).toBe("sharp");
    expect(r.standings.standings[0]?.pBest).toBe(1);
    // Each cell ran the variant's instructions under program.md's own frontmatter.
    const ran = readFileSync(r.variants[1]?.file as string, "utf8");
    expect(ran).toContain("Try X = 3");
    expect(ran).toContain("objective: { metric: score, direction: minimize }");
    // The program's own files are untouched; the report is written and escapes names.
    expect(readFileSync(program, "utf8")).toContain("Lower X.");
    const files = writeTournamentReport(tournamentSummary(r, out), join(out, "report"));
    const md = readFileSync(files[0] as string, "utf8");
    expect(md).toMatch(/\| 1 \| sharp \| \+40\.00% \|/);
    expect(existsSync(join(out, "report", "curves.svg"))).toBe(true);
    // Again, with the incumbent renamed and a new challenger: only the new one's cells run.
    writeFileSync(join(work, "vague.md"), "Think hard.\n");
    const more = [...variants];
    more.push(readVariant(program, join(work, "vague.md"), more));
    const r2 = await runTournament({ ...opts, variants: more });
    expect(r2.ranNow).toBe(2);
    expect(r2.standings.standings.find((s) => s.variant === "vague")?.vsIncumbent?.beats).toBe(false);
  }, 300_000);

  it("the CLI with a real researcher (the llm backend on the scripted model server) that follows the instructions it is given", async () => {
    // The model edits value.mjs to 3 when the instructions it was sent say so, else to 6.
    const fake = await startFakeModel({
      file: "value.mjs",
      oldText: "export const X = 5;",
      newText: "export const X = 6;",
      summary: { hypothesis: "change X", mechanism: "X is the score", expected: "lower" },
      targetFor: (text) => (text.includes("Try X = 3") ? { newText: "export const X = 3;" } : undefined),
    });
    try {
      const project = valueProject();
      const program = join(project, "program.md");
      writeFileSync(
        program,
        readFileSync(program, "utf8").replace(
          "acceptance: greedy",
          `acceptance: greedy\nagent: { backend: llm, base_url: "${fake.url}/v1", model: fake-model }`,
        ),
      );
      git(project, "commit", "-qam", "llm researcher");
      writeFileSync(join(project, "sharp.md"), "Try X = 3\n");
      const args = ["tournament", "sharp.md", "--seeds", "2", "--experiments", "1", "--remeasure", "1"];
      // Ctrl-C once the first cell is under way: it finishes, the rest wait for the next run.
      const first = spawnCli(args, { cwd: project, timeoutMs: 240_000 });
      await first.waitFor(/seed 1: started/, 120_000);
      first.child.kill("SIGINT");
      const stopped = await first.done;
      expect(stopped.code).toBe(130);
      expect(stopped.stderr).toMatch(/tournament: stopping after the running cells/);
      expect(stopped.stdout).toMatch(/incomplete: run the tournament again to finish it/);
      expect(stopped.stderr).not.toMatch(/\n\s+at /);
      const r = await runCli(args, { cwd: project, timeoutMs: 240_000 });
      // Only the cells the first run had not finished ran now.
      const startedNow = r.stderr.match(/: started/g)?.length ?? 0;
      const finishedBefore = stopped.stderr.match(/seed \d: [+-]\d/g)?.length ?? 0;
      expect(finishedBefore).toBeGreaterThanOrEqual(1);
      // Every cell that started finished: none began after the Ctrl-C (one place: --parallel 1).
      expect(stopped.stderr.match(/: started/g)?.length).toBe(finishedBefore);
      expect(startedNow).toBe(4 - finishedBefore);
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.code).toBe(0);
      const lines = r.stdout.split("\n").filter(Boolean);
      expect(lines[0]).toMatch(/^ 1\. sharp\s+\+40\.00% .*P\(best\) 1\.00 .*beats the incumbent$/);
      expect(lines[1]).toMatch(/^ 2\. incumbent\s+\+0\.00% .*\(incumbent\)$/);
      expect(lines[2]).toBe(
        "sharp beats program.md's instructions: put its instructions in program.md to adopt them",
      );
      expect(lines[3]).toMatch(/^report: \.autolab\/tournament\/report\/report\.md/);
      const json = JSON.parse(
        readFileSync(join(project, ".autolab", "tournament", "report", "report.json"), "utf8"),
      );
      expect(json.standings.winner).toBe("sharp");
      // Every proposal went through the model; none saw a holdout value.
      for (const q of fake.modelRequests()) expect(JSON.stringify(q.body)).not.toMatch(/100[0-9]\.125/);
      // Run again: everything is cached, same answer.
      const again = await runCli(
        ["tournament", "sharp.md", "--seeds", "2", "--experiments", "1", "--remeasure", "1"],
        {
          cwd: project,
        },
      );
      expect(again.stdout.split("\n")[0]).toBe(lines[0]);
    } finally {
      await fake.close();
    }
  }, 300_000);

  it("refuses a variant that changes the frontmatter, an empty one, a duplicate, a missing file; a project without git", async () => {
    const project = valueProject();
    const program = join(project, "program.md");
    const work = mkdtempSync(join(tmpdir(), "autolab-tournament-"));
    const inc = [incumbentOf(program)];
    const text = readFileSync(program, "utf8");
    // The attack: a variant that "wins" by measuring something else.
    writeFileSync(
      join(work, "cheat.md"),
      text.replace("budget: 5s", "budget: 50s").replace("Lower X.", "Try X = 3"),
    );
    expect(() => readVariant(program, join(work, "cheat.md"), inc)).toThrow(
      /changes "run" in the frontmatter/,
    );
    writeFileSync(
      join(work, "cheat2.md"),
      text
        .replace("editable: [value.mjs]", "editable: [value.mjs, evaluate.mjs]")
        .replace("Lower X.", "Try X = 3"),
    );
    expect(() => readVariant(program, join(work, "cheat2.md"), inc)).toThrow(/changes "files"/);
    // The same frontmatter with new instructions is fine.
    writeFileSync(join(work, "same-front.md"), text.replace("Lower X.", "Try X = 2"));
    expect(readVariant(program, join(work, "same-front.md"), inc).body).toBe("Try X = 2");
    writeFileSync(join(work, "empty.md"), "\n\n");
    expect(() => readVariant(program, join(work, "empty.md"), inc)).toThrow(/no instructions/);
    writeFileSync(join(work, "dup.md"), "Lower X.\n");
    expect(() => readVariant(program, join(work, "dup.md"), inc)).toThrow(/same instructions as incumbent/);
    expect(() => readVariant(program, join(work, "nope.md"), inc)).toThrow(/no variant file/);
    // Not in a repository: the cells could not clone it.
    const loose = mkdtempSync(join(tmpdir(), "autolab-tournament-loose-"));
    writeFileSync(join(loose, "program.md"), text);
    await expect(
      runTournament({
        program: join(loose, "program.md"),
        variants: [incumbentOf(join(loose, "program.md"))],
        seeds: [1],
        budget: { experiments: 1 },
        out: join(loose, "out"),
      }),
    ).rejects.toThrow(/not in a git repository with a commit/);
  });
});
