/**
 * A newcomer's first hour (issue #36 "first-hour defects"), each through the real CLI: what a
 * script reads from `status --json` before the first run.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { runCli, toysOfFile } from "./helpers/toy-project.ts";

const { toy } = toysOfFile();

describe("status --json before the first run", () => {
  it("with no notebook yet: JSON on stdout (run null), exit 0", async () => {
    const t = toy({});
    const r = await runCli(["status", "--json"], { cwd: t.dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s).toMatchObject({ run: null, metric: "score", imported: null });
    expect(s.message).toMatch(/No run yet/);
  });

  it("with only imported history (init --from): JSON with the prior history", async () => {
    const t = toy({});
    mkdirSync(join(t.dir, ".autolab"), { recursive: true });
    const ledger = new SqliteLedger(join(t.dir, ".autolab", "lab.db"));
    ledger.addImportedResults([
      {
        source: "autoresearch:results.tsv",
        seq: 1,
        commit: "a1b2c3d",
        metrics: { score: 3 },
        status: "keep",
        description: "baseline",
      },
      {
        source: "autoresearch:results.tsv",
        seq: 2,
        commit: "b2c3d4e",
        metrics: { score: 2 },
        status: "keep",
        description: "wider",
      },
    ]);
    ledger.close();
    const r = await runCli(["status", "--json"], { cwd: t.dir });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.run).toBeNull();
    expect(s.imported).toMatchObject({
      count: 2,
      sources: ["autoresearch:results.tsv"],
      lastKept: { metric: 2 },
    });
    // The text view is unchanged: it says so in words.
    const text = await runCli(["status"], { cwd: t.dir });
    expect(text.stdout).toMatch(/No run yet/);
  });
});

describe("watch --interval", () => {
  it("shows its default with a unit (a bare number there means seconds)", async () => {
    const r = await runCli(["watch", "--help"], { cwd: process.cwd() });
    expect(r.code).toBe(0);
    expect(r.stdout.replace(/\s+/g, " ")).toContain("(default: 500ms)");
  });
});
