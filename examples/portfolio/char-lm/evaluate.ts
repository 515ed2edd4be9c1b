// char-lm (portfolio): the evaluator, the same as examples/tiny-lm's. PROTECTED: experiments may not edit this file.
//
// Loads the checkpoint that train.ts wrote (through train.ts's own loadModel) and prints the
// bits per byte of the next-character predictions on the fixed evaluation sample of the
// validation and test splits (see prepare.ts):
//   val_bpb: 2.345678
//   test_bpb: 2.345678
// Run from the example directory, after `node prepare.ts` and `node train.ts`.
//
// The model code (the experiment's train.ts) runs in a child process of this one. Its only
// way to the score is the log-probabilities it returns, which are checked and renormalised
// here; whatever it prints goes to stderr, so it can never print a metric line of its own.

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { CharModel } from "./prepare.ts";
import { evaluateBpb, loadSplit, loadVocab } from "./prepare.ts";

const CHECKPOINT_DIR = "out";
const MODEL_SERVER = "--model-server";

type Reply = { ok: true; logProbs?: Float32Array } | { ok: false; error: string };

function fail(message: string): never {
  console.error(`evaluate: ${message}`);
  process.exit(1);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Child mode: load the model from ./train.ts and answer logProbs requests over IPC. */
async function serveModel(): Promise<void> {
  const send = process.send?.bind(process);
  if (!send) fail(`${MODEL_SERVER} is for evaluate's own use`);
  let model: CharModel;
  try {
    const trainUrl = pathToFileURL(path.join(process.cwd(), "train.ts")).href;
    const mod = (await import(trainUrl)) as { loadModel?: (dir: string) => CharModel };
    if (typeof mod.loadModel !== "function") throw new Error("train.ts does not export loadModel(dir)");
    model = mod.loadModel(CHECKPOINT_DIR);
  } catch (err) {
    send({ ok: false, error: `could not load the checkpoint: ${errorText(err)}` } satisfies Reply);
    process.exitCode = 1;
    process.disconnect();
    return;
  }
  process.on("disconnect", () => process.exit(0));
  send({ ok: true } satisfies Reply);
  process.on("message", (contexts: Uint8Array[]) => {
    let reply: Reply;
    try {
      reply = { ok: true, logProbs: model.logProbs(contexts) };
    } catch (err) {
      reply = { ok: false, error: `the model failed: ${errorText(err)}` };
    }
    send(reply);
  });
}

/** Parent side: one request at a time to the model server. */
function modelClient(child: ChildProcess): {
  next: () => Promise<Reply>;
  ask: (c: Uint8Array[]) => Promise<Reply>;
} {
  let waiting: { resolve: (r: Reply) => void; reject: (e: Error) => void } | undefined;
  child.on("message", (r: Reply) => {
    const w = waiting;
    waiting = undefined;
    w?.resolve(r);
  });
  child.on("exit", (code, signal) => {
    const w = waiting;
    waiting = undefined;
    w?.reject(new Error(`the model process exited (${signal ?? `code ${code}`})`));
  });
  child.on("error", (err) => waiting?.reject(err));
  const next = () =>
    new Promise<Reply>((resolve, reject) => {
      waiting = { resolve, reject };
    });
  return {
    next,
    ask: (contexts) => {
      const p = next();
      child.send(contexts);
      return p;
    },
  };
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const vocab = loadVocab();
  const val = loadSplit("val");
  const test = loadSplit("test");
  const trainFile = path.join(process.cwd(), "train.ts");
  if (!existsSync(trainFile)) fail(`${trainFile} not found: run evaluate from the example directory`);
  const checkpoint = path.join(process.cwd(), CHECKPOINT_DIR, "model.bin");
  if (!existsSync(checkpoint)) fail(`no checkpoint at ${checkpoint}: run \`node train.ts\` first`);

  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), MODEL_SERVER], {
    stdio: ["ignore", "pipe", "inherit", "ipc"],
    serialization: "advanced", // typed arrays cross as typed arrays
  });
  child.stdout?.pipe(process.stderr); // the model's own prints: visible, never parsed as metrics
  const client = modelClient(child);
  let valBpb: number;
  let testBpb: number;
  try {
    const hello = await client.next();
    if (!hello.ok) throw new Error(hello.error);
    const logProbs = async (contexts: Uint8Array[]) => {
      const r = await client.ask(contexts);
      if (!r.ok) throw new Error(r.error);
      return r.logProbs as Float32Array;
    };
    valBpb = await evaluateBpb(logProbs, val, vocab.size);
    testBpb = await evaluateBpb(logProbs, test, vocab.size);
  } catch (err) {
    child.kill("SIGKILL");
    fail(errorText(err));
  }
  child.disconnect();

  console.log(`val_bpb: ${valBpb.toFixed(6)}`);
  console.log(`test_bpb: ${testBpb.toFixed(6)}`);
  console.log(`eval_seconds: ${((performance.now() - t0) / 1000).toFixed(2)}`);
}

if (process.argv[2] === MODEL_SERVER) await serveModel();
else await main();
