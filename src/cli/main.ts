// First: under the bin shim, die with it (src/cli/shim-parent.ts).
import "./shim-parent.ts";
import { delimiter, dirname } from "node:path";
import { Command, CommanderError, Option } from "commander";
import { AUTOLAB_VERSION, listExamples } from "../app/init.ts";
import { benchCommand } from "./bench-command.ts";
import { guardOutput } from "./closed-output.ts";
import { dbImportCommand, dbMigrateCommand } from "./db-command.ts";
import { directCommand } from "./direct-command.ts";
import { doctorCommand } from "./doctor-command.ts";
import { handleError } from "./errors.ts";
import { finalizeCommand } from "./finalize-command.ts";
import { durationFlag, intFlag, slotsFlag, usdFlag } from "./flags.ts";
import { contributeCommand, hubCommand } from "./hub-commands.ts";
import { initCommand } from "./init-command.ts";
import { knowledgeSearchCommand, knowledgeStatsCommand } from "./knowledge-command.ts";
import { mcpCommand } from "./mcp-command.ts";
import { reportCommand } from "./report-command.ts";
import { demoCommand, runCommand } from "./run-commands.ts";
import { serveCommand } from "./serve-command.ts";
import { summaryCommand } from "./summary-command.ts";
import { tournamentCommand } from "./tournament-command.ts";
import {
  contextCommand,
  exportCommand,
  failuresCommand,
  logCommand,
  showCommand,
  statusCommand,
} from "./views.ts";
import { watchCommand } from "./watch-command.ts";
import { workerCommand } from "./worker-command.ts";

// Commands autolab runs (setup, trials, evaluate, agent CLIs) find the Node that runs autolab
// first on PATH: programs written in TypeScript need Node 24's type stripping, and the system
// Node may be older (the bin shim re-runs autolab with a local Node 24).
process.env.PATH = `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ""}`;

// `autolab … | head` ends quietly (src/cli/closed-output.ts).
guardOutput();

// Every number and duration on the command line is checked in flags.ts, by program.md's rules.
const maxExperiments = intFlag({
  flag: "-n/--max-experiments",
  min: 0,
  what: "experiments besides the baseline",
  example: "-n 10",
});
const budget = durationFlag({ flag: "-b/--budget", field: "run.budget", example: "-b 30s" });
const slots = slotsFlag("-s/--slots");

const cli = new Command("autolab")
  .description(
    "An autonomous research lab: propose → run under a budget → score → keep only true improvements.",
  )
  .version(AUTOLAB_VERSION)
  .showHelpAfterError()
  .exitOverride();

const programOpt = [
  "-p, --program <path>",
  "program.md or its directory (default: current directory)",
] as const;
const tagOpt = ["-t, --tag <tag>", "the run (default: the newest)"] as const;
const dbOpt = [
  "--db <url>",
  "the notebook on PostgreSQL, postgres://user@host/db[?schema=lab] (default: $AUTOLAB_DB, program.md's db:, .autolab/lab.db)",
] as const;

// `--db` reaches every command through AUTOLAB_DB, where app/lab.ts's locateNotebook looks first
// (never passed on: trials and researchers get a scrubbed environment).
cli.hook("preAction", (_cli, action) => {
  const db = action.opts().db;
  if (typeof db === "string" && db) process.env.AUTOLAB_DB = db;
});

cli
  .command("init")
  .description("create program.md (or copy an example, or migrate from autoresearch) in a git repository")
  .argument("[dir]", "project directory", ".")
  .option("-e, --example <name>", "copy an example project (the list is below)")
  // Read from examples/ only when help is shown: not on every start of the CLI.
  .addHelpText("after", () => `\nExamples (--example): ${listExamples().join(", ")}`)
  .option(
    "--from <tool>",
    "migrate a checkout of autoresearch or pi-autoresearch: program.md from its files, its results as prior history",
  )
  .action(initCommand);

cli
  .command("doctor")
  .description(
    "check this machine and project: git, Node, the sandbox, the researchers, the notebook, GPUs (exit 1 if anything fails)",
  )
  .argument("[dir]", "project directory (holding program.md)", ".")
  .option(...dbOpt)
  .action(doctorCommand);

cli
  .command("run")
  .description("run the research loop (resumes the newest run unless --tag names a new one)")
  .option(...programOpt)
  .option(...dbOpt)
  .option(
    "-t, --tag <tag>",
    "run tag; the ratchet branch is autolab/<tag> (default: resume newest, or today's date)",
  )
  .option(
    "-n, --max-experiments <n>",
    "stop when the run holds n experiments besides the baseline",
    maxExperiments,
  )
  .option(
    "--max-trials <n>",
    "stop when the run has started n trials (baseline, candidates, re-measurements: every evaluation)",
    // 0 is a number: the run's budget check then says why it leaves no trial for a candidate.
    intFlag({ flag: "--max-trials", min: 0, what: "trials of every kind", example: "--max-trials 100" }),
  )
  .option(
    "--max-time <duration>",
    "start no trial after this long (e.g. 8h, 90m)",
    durationFlag({ flag: "--max-time", example: "--max-time 8h" }),
  )
  .option(
    "--max-cost <usd>",
    "start no proposal once the researchers' reported cost, with those in flight, would pass this many dollars (over the run)",
    usdFlag("--max-cost"),
  )
  .option("-b, --budget <duration>", "override program.md's run.budget for this invocation", budget)
  .option(
    "-s, --slots <n>",
    "trials at once for this invocation (overrides program.md's slots: count)",
    slots,
  )
  .option("-a, --agent <name>", "researcher (default: program.md's agent)")
  .option(
    "--seed <n>",
    "the run's seed: the built-in researcher's and the frontier's (new runs only; trial seeds are drawn at random, docs/security.md)",
    intFlag({ flag: "--seed", min: 0, what: "the run's seed", example: "--seed 1" }),
  )
  .option(
    "--allow-dirty",
    "start a new run from the last commit even though program.md or editable/protected files have uncommitted changes",
  )
  .option(
    "--no-prior-work",
    "leave other runs' results out of the researcher's context (as program.md's prior_work: false)",
  )
  .option(
    "--fleet <url>",
    "run trials on a worker fleet: its PostgreSQL database (postgres://user@host/db; password from PGPASSWORD or ~/.pgpass)",
  )
  .action(runCommand);

cli
  .command("worker")
  .description('serve a worker fleet\'s trial queue on this machine (docs/distributed.md "Worker fleet")')
  .option("--db <url>", "the fleet's PostgreSQL database (default $AUTOLAB_FLEET_DB)")
  .option("-s, --slots <n>", "trials at once on CPU slots (default 1)", slots)
  .option("--gpus <list>", "one slot per GPU, e.g. 0,1,2,3 (each trial gets CUDA_VISIBLE_DEVICES)")
  .option("--name <name>", "how status shows this worker (default: the host name)")
  .option("--cache <dir>", "cache repositories and worktrees (default ~/.cache/autolab/fleet)")
  .action(workerCommand);

cli
  .command("hub")
  .description(
    'serve a program to outside contributors: signed claims, cheap gates, verification on the fleet of the same database (docs/hub.md "Running a hub")',
  )
  .argument(
    "[dir]",
    "the project the hub serves (a git repository with program.md; its HEAD is the root)",
    ".",
  )
  .option(
    "--db <url>",
    "the hub's PostgreSQL database, postgres://user@host/db[?schema=autolab_hub] (default $AUTOLAB_HUB_DB)",
  )
  .option("--host <host>", "address to listen on", "127.0.0.1")
  .option(
    "--port <port>",
    "port to listen on (0: any free port)",
    intFlag({ flag: "--port", min: 0, max: 65535, what: "a TCP port", example: "--port 7878" }),
    7878,
  )
  .option("--data <dir>", "the hub's repository and uploaded bundles (default <dir>/.autolab/hub)")
  .option(
    "--hardware-class <name>",
    "what the verifiers run on; claims naming another class are refused (default cpu, recorded at the first start)",
  )
  .option(
    "--workers <n>",
    "verifier slots in this process (else start `autolab worker --db <url>` on the verifier machines)",
    intFlag({ flag: "--workers", min: 1, what: "worker slots", example: "--workers 2" }),
  )
  .action(hubCommand);

cli
  .command("contribute")
  .description(
    'search for a hub: run the loop on its head with your researcher, then send what it kept as signed claims (docs/hub.md "Joining a hub")',
  )
  .argument("[dir]", "the local clone (made when missing; default ./autolab-hub-<host>-<port>)")
  .requiredOption("--hub <url>", "the hub's address, e.g. http://hub.example.org:7878")
  .option(
    "--identity <file>",
    "your key pair (default ~/.config/autolab/hub/<host>_<port>.json, made on first use)",
  )
  .option("-n, --max-experiments <n>", "experiments besides the baseline", maxExperiments)
  .option(
    "--max-time <duration>",
    "start no trial after this long (e.g. 8h, 90m)",
    durationFlag({ flag: "--max-time", example: "--max-time 8h" }),
  )
  .option("-a, --agent <name>", "researcher (default: the program's agent)")
  .option("-s, --slots <n>", "trials at once", slots)
  .option("--hardware-class <name>", "what your trials ran on (default: the hub's class)")
  .option("--no-share-findings", "send only kept experiments, not the discarded ones")
  .option("--wait", "follow the claims until the hub's verifiers decide")
  .action(contributeCommand);

cli
  .command("demo")
  .description("run the tiny-lm example in a temporary repository: about ten 10-second experiments")
  .option("-n, --max-experiments <n>", "experiments besides the baseline", maxExperiments, 10)
  .option("-b, --budget <duration>", "per-trial budget", budget)
  .option("-s, --slots <n>", "trials at once (tiny-lm trains on one core each)", slots)
  .option("--dir <dir>", "where to create the demo project (default: a new temporary directory)")
  .action(demoCommand);

cli
  .command("status")
  .description("the run at a glance: baseline, best, counts")
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option("--json", "machine-readable (see docs/cli.md)")
  .option(
    "--fleet <url>",
    "show the worker fleet's workers (default: $AUTOLAB_FLEET_DB, else program.md's executor.fleet.db)",
  )
  .action(statusCommand);

cli
  .command("direct")
  .description(
    "steer a running lab: a directive the next researchers read (recorded; --list, --withdraw <id>)",
  )
  .argument("[text]", 'the directive, e.g. "try smaller learning rates first"')
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option("--list", "the run's directives, withdrawn ones marked")
  .option(
    "--withdraw <id>",
    "end directive <id> (as --list numbers them)",
    intFlag({
      flag: "--withdraw",
      min: 1,
      what: "a directive's number from --list",
      example: "--withdraw 2",
    }),
  )
  .action(directCommand);

cli
  .command("summary")
  .description(
    "what happened overnight: what was kept and on what evidence, what to review, what failed, cost, next ideas (read-only)",
  )
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option(
    "--since <duration>",
    "the window, back from now (default 8h)",
    durationFlag({ flag: "--since", example: "--since 8h" }),
  )
  .option("--json", "machine-readable")
  .action(summaryCommand);

cli
  .command("log")
  .description("every experiment of the run, oldest first")
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option("--json", "machine-readable (see docs/cli.md)")
  .option("--holdout", "include holdout metrics (never show these to an agent)")
  .action(logCommand);

cli
  .command("show")
  .description("one experiment: hypothesis, mechanism, diff, trials, decision")
  .argument("<id>", "experiment number (as in `autolab log`)")
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option("--json", "machine-readable")
  .option("--holdout", "include holdout metrics (never show these to an agent)")
  .action(showCommand);

cli
  .command("context")
  .description(
    "the notebook as a researcher sees it (best, recent experiments, failures, directions, prior work from other runs)",
  )
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option("--no-prior-work", "leave other runs' results out")
  .action(contextCommand);

cli
  .command("failures")
  .description("crashed and rejected experiments with their reasons and log tails")
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option("--json", "machine-readable")
  .action(failuresCommand);

cli
  .command("export")
  .description(
    "export the run: results-tsv (autoresearch's results.tsv), log-jsonl (pi-autoresearch's .auto/log.jsonl), jsonl, or trajectories for a trainer (trajectories, trajectories-sft, trajectories-dpo: docs/learning.md)",
  )
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option(
    "-f, --format <format>",
    "results-tsv | log-jsonl | jsonl | trajectories | trajectories-sft | trajectories-dpo",
    "results-tsv",
  )
  .option(
    "-o, --out <file>",
    "write to a file instead of stdout (an existing one only with --append or --force)",
  )
  .option(
    "--append",
    "add this run to the existing file: a new segment of a log.jsonl, rows under a results.tsv's header, more lines of jsonl",
  )
  .option("--force", "replace the existing file")
  .action(exportCommand);

cli
  .command("mcp")
  .description(
    "serve the lab to an interactive agent over MCP (stdio): context, failures, status, run_experiment, note, finalize_plan",
  )
  .option(...programOpt)
  .option(...dbOpt)
  .option("-t, --tag <tag>", "run tag (default: resume the newest run, or start one)")
  .action(mcpCommand);

cli
  .command("serve")
  .description("the live dashboard and a read-only JSON API + event stream of the lab (docs/dashboard.md)")
  .option(...programOpt)
  .option(...dbOpt)
  .option(
    "--port <port>",
    "port (0: any free one)",
    intFlag({
      flag: "--port",
      min: 0,
      max: 65535,
      what: "a TCP port; 0 picks a free one",
      example: "--port 8420",
    }),
    8420,
  )
  .option("--host <host>", "address to bind; anything but loopback needs --token", "127.0.0.1")
  .option("--token <token>", "every request must carry it (default: $AUTOLAB_TOKEN)")
  .option(
    "--fleet <url>",
    "show the worker fleet's workers (default: $AUTOLAB_FLEET_DB, else program.md's executor.fleet.db)",
  )
  .action(serveCommand);

cli
  .command("bench")
  .description(
    "compare configurations (acceptance rule, org or single researcher, researcher, program.md variant) over a portfolio of programs under equal budgets and seeds; a verdict per layer on held-out programs (docs/learning.md)",
  )
  .argument("<suite>", "the suite file (.yaml, or .md with YAML frontmatter)")
  .option(
    "-o, --out <dir>",
    "the bench's directory: state, cells, report (default: .autolab/bench/<suite> next to the suite)",
  )
  .option(
    "--parallel <n>",
    "cells at once (default 1)",
    intFlag({ flag: "--parallel", min: 1, max: 256, what: "cells run at once", example: "--parallel 2" }),
  )
  .option("--fleet <url>", "run every cell's trials on a worker fleet (its PostgreSQL database)")
  .option("--json", "print the summary as JSON")
  .action(benchCommand);

cli
  .command("tournament")
  .description(
    "run variants of program.md's instructions under identical budgets and seeds and rank them with confidence; --evolve: an LLM writes the next variant from the evidence, and it replaces the instructions only if it wins (docs/learning.md)",
  )
  .argument(
    "[variants...]",
    "files with other instructions (a markdown body, or a program.md with the same frontmatter)",
  )
  .option(...programOpt)
  .option(
    "--seeds <n>",
    "seeds per variant (default 5: fewer rarely tell variants apart; docs/learning.md)",
    intFlag({ flag: "--seeds", min: 1, max: 1000, what: "runs per variant", example: "--seeds 5" }),
  )
  .option(
    "--experiments <n>",
    "budget per cell: experiments besides the baseline (default 10)",
    intFlag({ flag: "--experiments", min: 1, what: "experiments per cell", example: "--experiments 10" }),
  )
  .option(
    "--trials <n>",
    "budget per cell: trials",
    intFlag({ flag: "--trials", min: 1, what: "trials per cell", example: "--trials 30" }),
  )
  .option(
    "--time <duration>",
    "budget per cell: wall-clock time",
    durationFlag({ flag: "--time", example: "--time 10m" }),
  )
  .option(
    "--remeasure <n>",
    "fresh-seed trials of each cell's baseline and best (default 3; 0: the runs' own record)",
    intFlag({
      flag: "--remeasure",
      min: 0,
      max: 64,
      what: "re-measurement trials",
      example: "--remeasure 3",
    }),
  )
  .option("--agent <backend>", "the researcher for every variant (default: program.md's agent)")
  .option("-o, --out <dir>", "the tournament's directory (default: .autolab/tournament beside program.md)")
  .option(
    "--parallel <n>",
    "cells at once (default 1)",
    intFlag({ flag: "--parallel", min: 1, max: 256, what: "cells run at once", example: "--parallel 2" }),
  )
  .option("--fleet <url>", "run every cell's trials on a worker fleet (its PostgreSQL database)")
  .option(
    "--evolve",
    "an LLM writes the next variant from the notebooks' evidence; it must win to replace program.md's instructions",
  )
  .option(
    "--generations <n>",
    "--evolve rounds (default 1)",
    intFlag({
      flag: "--generations",
      min: 1,
      max: 100,
      what: "rounds of --evolve",
      example: "--generations 3",
    }),
  )
  .option("--writer-model <id>", "--evolve: the model that writes variants (default: program.md's llm agent)")
  .option("--writer-base-url <url>", "--evolve: its OpenAI-compatible endpoint")
  .option("--writer-provider <name>", "--evolve: openai-compatible (default), anthropic or openai")
  .option("--writer-api-key-env <var>", "--evolve: the environment variable holding its API key")
  .option("--json", "print the summary as JSON")
  .action(tournamentCommand);

cli
  .command("report")
  .description("report.md with the progress chart (progress.svg, progress.png) and the kept changes")
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option("-o, --out <dir>", "output directory (default: .autolab/reports/<tag>)")
  .option("--force", "replace report files already in the -o directory")
  .option("--holdout", "include holdout metrics (never show these to an agent)")
  .action(reportCommand);

cli
  .command("finalize")
  .description(
    "the run's kept changes as reviewable branches, one per change from the base (dry run unless --apply; docs/finalize.md)",
  )
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option("--apply", "create the branches autolab-finalize/<tag>/<n>-<slug>")
  .option(
    "--verify",
    "re-measure each branch alone against the base (trials in the sandbox; notes in the notebook)",
  )
  .option(
    "--trials <n>",
    "trials per configuration for --verify",
    intFlag({ flag: "--trials", min: 1, what: "trials per branch and for the base", example: "--trials 3" }),
  )
  .option("--pr", "push each branch and open a pull request with `gh` (implies --apply)")
  .option("--remote <name>", "the remote --pr pushes to", "origin")
  .option("--json", "the plan as JSON")
  .action(finalizeCommand);

cli
  .command("watch")
  .description("a live view of the lab in the terminal (Ctrl-C quits)")
  .option(...programOpt)
  .option(...dbOpt)
  .option(...tagOpt)
  .option(
    "-n, --last <n>",
    "experiments listed",
    intFlag({ flag: "-n/--last", min: 1, what: "experiments listed", example: "-n 20" }),
    10,
  )
  .addOption(
    // The default shown with its unit: a bare number on the command line means seconds.
    new Option(
      "--interval <duration>",
      "how often to look at the notebook (2s, 500ms; a bare number is seconds)",
    )
      .argParser(durationFlag({ flag: "--interval", example: "--interval 2s" }))
      .default(500, "500ms"),
  )
  .option(
    "--fleet <url>",
    "show the worker fleet's workers too (default: $AUTOLAB_FLEET_DB, else program.md's executor.fleet.db)",
  )
  .action(watchCommand);

const db = cli
  .command("db")
  .description("the notebook on PostgreSQL: migrate it, move a SQLite lab into it (docs/distributed.md)");
db.command("migrate")
  .description(
    "bring the PostgreSQL notebook (--db, $AUTOLAB_DB or program.md's db:) to this autolab's schema",
  )
  .option(...programOpt)
  .option(...dbOpt)
  .action(dbMigrateCommand);
db.command("import")
  .description(
    "copy a SQLite lab (default: .autolab/lab.db) into an empty PostgreSQL notebook, and verify the copy",
  )
  .argument("[file]", "the SQLite notebook to import")
  .option(...programOpt)
  .option(...dbOpt)
  .action(dbImportCommand);

const knowledge = cli
  .command("knowledge")
  .description(
    "the machine's knowledge store: decided experiments of every run, the prior work new runs are shown",
  );
knowledge
  .command("search")
  .description("the prior results closest to the words given (full-text search, closest first)")
  .argument("<query...>", "words to look for")
  .option(
    "-k, --limit <k>",
    "results listed",
    intFlag({ flag: "-k/--limit", min: 1, what: "results listed", example: "-k 5" }),
    10,
  )
  .option("--json", "machine-readable")
  .action((words: string[], flags: { limit?: number; json?: boolean }) =>
    knowledgeSearchCommand(words, {
      ...(flags.limit !== undefined ? { k: flags.limit } : {}),
      ...(flags.json ? { json: true } : {}),
    }),
  );
knowledge
  .command("stats")
  .description("where the knowledge store is and how much it holds")
  .option("--json", "machine-readable")
  .action(knowledgeStatsCommand);

try {
  await cli.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // --help and --version end here too, with exit code 0.
    process.exitCode = err.exitCode === 0 ? 0 : 2;
  } else {
    process.exitCode = handleError(err);
  }
}
