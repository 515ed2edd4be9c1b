// autolab embedded in another program: your researcher, your executor, the harness's loop.
//   node examples/library/embed.ts <project with a committed program.md>
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { type Agent, createRun, type Executor, LocalExecutor } from "autolab";

// A researcher: halves the STEP constant of the editable train.mjs.
const halver: Agent = {
  name: "halver",
  async propose({ worktree }) {
    const file = join(worktree, "train.mjs");
    const text = await readFile(file, "utf8");
    const step = Number(/STEP = ([\d.e+-]+)/.exec(text)?.[1]);
    await writeFile(file, text.replace(/STEP = [\d.e+-]+/, `STEP = ${step / 2}`));
    return { hypothesis: `STEP ${step} → ${step / 2}`, mechanism: "smaller steps overshoot less" };
  },
};

// An executor: the local, sandboxed one, with every trial's outcome logged.
const local = new LocalExecutor();
const executor: Executor = {
  setup: (...args) => local.setup(...args),
  reap: (token) => local.reap(token),
  async runTrial(spec) {
    const result = await local.runTrial(spec);
    console.log(`trial (seed ${spec.seed}): ${result.status}`);
    return result;
  },
};

const outcome = await createRun({
  program: process.argv[2],
  agent: halver,
  executor,
  maxExperiments: 3,
  onEvent: (e) => e.type === "decision" && console.log(`#${e.n} ${e.action}: ${e.reason}`),
});
console.log(`stopped: ${outcome.stoppedBecause}; best #${outcome.best?.n}`);
outcome.lab.ledger.close();
