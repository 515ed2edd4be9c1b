/**
 * Researcher text is untrusted: a hypothesis, mechanism, reason or log tail holding terminal
 * escape sequences (an OSC that retitles the window, a CSI that clears the screen, a C1 CSI)
 * must reach no terminal raw — not from `run`'s progress lines, `log`, `show`, `status`,
 * `failures`, `context`, `export`, `watch`, nor an error message — also when the output goes to
 * a file. The notebook keeps the text as it was written; only what is shown is made safe.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { eventLine, watchScreen } from "../src/cli/watch-command.ts";
import { SqliteLedger } from "../src/ledger/sqlite-ledger.ts";
import { writeRun } from "./helpers/notebook-fixture.ts";
import { commitAll, createToyProject, readLedger, runCli, type ToyProject } from "./helpers/toy-project.ts";

const toys: ToyProject[] = [];
afterAll(() => {
  for (const t of toys) t.cleanup();
});

const OSC_TITLE = "\x1b]0;pwned\x07";
const CLEAR = "\x1b[2J";
const C1_CSI = "\u009b31m";
const EVIL = `LR 0.05 ${OSC_TITLE} then ${CLEAR} and ${C1_CSI}red`;

/** No ESC, BEL, C1 control or stray carriage return reaches the reader. */
function expectNoControls(text: string, what: string): void {
  const control = (code: number) =>
    (code < 0x20 && code !== 0x09 && code !== 0x0a) || (code >= 0x7f && code <= 0x9f);
  const found = [...text].filter((c) => control(c.charCodeAt(0)));
  expect(
    found.map((c) => `U+${c.charCodeAt(0).toString(16).padStart(4, "0")}`),
    what,
  ).toEqual([]);
}

describe("researcher text on a terminal", () => {
  let t: ToyProject;

  it("autolab run prints the researcher's hypothesis without its escape sequences", async () => {
    // A command researcher whose summary carries the escape sequences.
    t = createToyProject({ agent: '{ backend: command, command: "node agent.mjs" }' });
    toys.push(t);
    writeFileSync(
      join(t.dir, "agent.mjs"),
      `import { readFileSync, writeFileSync } from "node:fs";
writeFileSync("train.mjs", readFileSync("train.mjs", "utf8").replace(/const LR = [^;]+;/, "const LR = 0.05;"));
console.log(JSON.stringify({ hypothesis: ${JSON.stringify(EVIL)}, mechanism: ${JSON.stringify(`faster ${CLEAR}steps`)} }));
`,
    );
    commitAll(t.dir, "a researcher");
    const r = await runCli(["run", "-n", "1"], { cwd: t.dir });
    expect(r.code, r.stderr).toBe(0);
    expectNoControls(r.stdout, "run stdout");
    expectNoControls(r.stderr, "run stderr");
    // Shown, made visible: the reader sees that something was there.
    expect(r.stdout).toContain("LR 0.05 \\x1b]0;pwned\\x07 then \\x1b[2J and \\x9b31mred");
    // The notebook keeps the text as written.
    const db = new SqliteLedger(join(t.dir, ".autolab", "lab.db"));
    try {
      const run = db.latestRun();
      expect(run && db.getExperiment(run.id, 1)?.hypothesis).toBe(EVIL);
    } finally {
      db.close();
    }
    expect(readLedger(t.dir).experiments).toHaveLength(2);
  });

  it.each([["log"], ["show", "1"], ["status"], ["context"], ["export"]].map((a) => [a.join(" "), a]))(
    "autolab %s after that run",
    async (_name, args) => {
      const r = await runCli(args, { cwd: t.dir });
      expect(r.code, r.stderr).toBe(0);
      expectNoControls(r.stdout, "stdout");
      expect(r.stdout).toContain("\\x1b]0;pwned\\x07");
    },
  );
});

describe("every field a view shows", () => {
  const t = createToyProject();
  toys.push(t);
  const ledger = new SqliteLedger(join(t.dir, ".autolab", "lab.db"));
  try {
    writeRun(ledger, {
      tag: "evil",
      programPath: join(t.dir, "program.md"),
      metric: "score",
      experiments: [
        { action: "keep", metric: 3 },
        {
          action: "crash",
          hypothesis: EVIL,
          mechanism: `mech ${CLEAR}`,
          reason: `crash: ${OSC_TITLE} exit 1`,
          logTail: `loss 2.5\r\n${CLEAR}${OSC_TITLE}boom\u009b2J\n`,
        },
        {
          action: "discard",
          metric: 3.1,
          hypothesis: `second\n${OSC_TITLE}line`,
          reason: `not better ${CLEAR}`,
        },
      ],
    });
  } finally {
    ledger.close();
  }

  it.each(
    [
      ["log"],
      ["log", "--json"],
      ["show", "1"],
      ["show", "1", "--json"],
      ["show", "2"],
      ["status"],
      ["status", "--json"],
      ["failures"],
      ["failures", "--json"],
      ["export"],
      ["export", "-f", "jsonl"],
    ].map((a) => [a.join(" "), a]),
  )("autolab %s (stdout to a file)", async (_name, args) => {
    const r = await runCli(args, { cwd: t.dir });
    expect(r.code, r.stderr).toBe(0);
    expectNoControls(r.stdout, "stdout");
    expect(r.stderr).toBe("");
    // JSON stays JSON, and says the same text.
    if (args.includes("--json") || args.includes("jsonl")) {
      const first = r.stdout.trim().split("\n")[0] ?? "";
      const parsed: unknown = args.includes("jsonl") ? JSON.parse(first) : JSON.parse(r.stdout);
      if (args[0] === "show") expect((parsed as { hypothesis: string }).hypothesis).toBe(EVIL);
    }
  });

  it("show keeps a multi-line field's lines, and -o writes a file that is just as safe", async () => {
    const shown = await runCli(["show", "2"], { cwd: t.dir });
    expect(shown.stdout).toContain("Hypothesis: second\n\\x1b]0;pwned\\x07line");
    const out = join(t.scratch, "export.tsv");
    const r = await runCli(["export", "-o", out], { cwd: t.dir });
    expect(r.code, r.stderr).toBe(0);
    expectNoControls(readFileSync(out, "utf8"), "export -o");
  });

  it("watch: the screen and the event lines", () => {
    const db = new SqliteLedger(join(t.dir, ".autolab", "lab.db"));
    try {
      const run = db.latestRun();
      if (!run) throw new Error("no run");
      const screen = watchScreen(run, db.listExperiments(run.id), [], {
        last: 10,
        columns: 200,
        rows: 40,
        now: Date.now(),
      });
      expectNoControls(screen, "watch screen");
      const line = eventLine({
        type: "experiment_created",
        run: "evil",
        n: 1,
        hypothesis: EVIL,
      } as Parameters<typeof eventLine>[0]);
      expectNoControls(line ?? "", "watch event line");
    } finally {
      db.close();
    }
  });
});
