// biome-ignore-all lint/style/noNonNullAssertion: typed-array and array reads in the numeric loops are in bounds
// intent (portfolio): the labelled messages. PROTECTED: experiments may not edit this file.
//
// Writes a fixed set of short customer messages, each labelled with one of five intents
// (billing, shipping, technical, account, cancel), under ./data (its own seed: the same
// bytes everywhere):
//   train.jsonl   {"text", "label"} lines (250)
//   val.jsonl     {"text"} lines (700)      val_labels.json: their labels
//   test.jsonl    {"text"} lines (700)      test_labels.json: their labels
// The messages come from templates with synonyms, shared words across intents ("order",
// "account", "card", "log in"), random letter case, filler, typos (a swapped or dropped
// letter) and 4% wrong labels, so no single keyword decides. The label files are holdout
// files: only evaluate.ts reads them.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

export const DATA_DIR = path.join(process.cwd(), "data");
export const LABELS = ["billing", "shipping", "technical", "account", "cancel"] as const;
const SIZES = { train: 250, val: 700, test: 700 } as const;
const VERSION = "intent-2";

const SLOTS: Record<string, string[]> = {
  order: ["order", "purchase", "order #{n}", "my order", "parcel #{n}"],
  charged: ["charged", "billed", "debited", "invoiced"],
  twice: ["twice", "two times", "double", "again"],
  card: ["card", "credit card", "bank account", "paypal"],
  money: ["refund", "my money back", "a credit", "reimbursement"],
  arrive: ["arrived", "come", "shown up", "been delivered"],
  late: ["late", "delayed", "stuck", "lost"],
  app: ["app", "website", "site", "mobile app", "desktop client"],
  crash: ["crashes", "freezes", "hangs", "shows an error", "goes blank"],
  screen: ["settings", "checkout", "the login page", "my profile page", "the order page"],
  password: ["password", "login", "pin", "passcode"],
  reset: ["reset", "change", "recover", "update"],
  email: ["email address", "phone number", "username", "address on file"],
  cancel: ["cancel", "end", "stop", "terminate"],
  plan: ["subscription", "membership", "plan", "account", "monthly plan"],
};

const TEMPLATES: Record<(typeof LABELS)[number], string[]> = {
  billing: [
    "I was {charged} {twice} for {order}",
    "why was my {card} {charged} for {order}",
    "I want {money} for {order}, the amount is wrong",
    "there is an extra fee on my {card}",
    "the invoice for {order} shows the wrong amount",
    "you {charged} my {card} after I paid already",
  ],
  shipping: [
    "{order} has not {arrive} yet",
    "where is {order}? it is {late}",
    "tracking for {order} says delivered but it has not {arrive}",
    "my delivery is {late}, can you check {order}",
    "when will {order} ship",
    "the courier lost {order}",
  ],
  technical: [
    "the {app} {crash} when I open {screen}",
    "I get an error on {screen} in the {app}",
    "the {app} {crash} every time I try to log in",
    "{screen} does not load in the {app}",
    "after the update the {app} {crash}",
    "the {app} {crash} at checkout when I pay by {card}",
  ],
  account: [
    "I need to {reset} my {password}",
    "I can't log in to my account, please {reset} my {password}",
    "how do I {reset} the {email} on my account",
    "my account is locked after a wrong {password}",
    "please {reset} my {email}",
    "the code to log in never comes to my {email}",
  ],
  cancel: [
    "I want to {cancel} my {plan}",
    "please {cancel} my {plan} before it renews",
    "how do I {cancel} the {plan} and close my account",
    "{cancel} my {plan}, I was {charged} for a month I did not use",
    "do not renew my {plan}",
    "I would like to {cancel} the {plan} today",
  ],
};
const BEFORE = ["", "", "hi, ", "hello. ", "urgent: ", "hey team - ", "good morning, "];
const AFTER = ["", "", " thanks", " please help", " asap!!", ". thank you", " :(", " - sent from my phone"];

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function message(rand: () => number, label: (typeof LABELS)[number]): string {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
  let text = pick(TEMPLATES[label]).replace(/\{(\w+)\}/g, (_, slot: string) =>
    pick(SLOTS[slot]!).replace("{n}", String(1000 + Math.floor(rand() * 9000))),
  );
  text = pick(BEFORE) + text + pick(AFTER);
  // typos: a swapped or dropped letter in about one word in three
  text = text
    .split(" ")
    .map((w) => {
      if (w.length < 4 || rand() > 1 / 3) return w;
      const i = 1 + Math.floor(rand() * (w.length - 2));
      return rand() < 0.5 ? w.slice(0, i) + w[i + 1] + w[i] + w.slice(i + 2) : w.slice(0, i) + w.slice(i + 1);
    })
    .join(" ");
  const c = rand();
  if (c < 0.15) return text.toUpperCase();
  if (c < 0.35) return text.replace(/\b\w/g, (m) => m.toUpperCase());
  return text;
}

function rows(n: number, rand: () => number): { text: string; label: string }[] {
  return Array.from({ length: n }, () => {
    const truth = LABELS[Math.floor(rand() * LABELS.length)]!;
    const text = message(rand, truth);
    const label = rand() < 0.04 ? LABELS[Math.floor(rand() * LABELS.length)]! : truth;
    return { text, label };
  });
}

export function prepare(): boolean {
  const stamp = path.join(DATA_DIR, "version.txt");
  if (existsSync(stamp) && readFileSync(stamp, "utf8") === VERSION) return false;
  mkdirSync(DATA_DIR, { recursive: true });
  const rand = mulberry32(0x1e7e);
  const lines = (xs: object[]) => `${xs.map((x) => JSON.stringify(x)).join("\n")}\n`;
  const train = rows(SIZES.train, rand);
  writeFileSync(path.join(DATA_DIR, "train.jsonl"), lines(train));
  for (const split of ["val", "test"] as const) {
    const xs = rows(SIZES[split], rand);
    writeFileSync(path.join(DATA_DIR, `${split}.jsonl`), lines(xs.map((x) => ({ text: x.text }))));
    writeFileSync(path.join(DATA_DIR, `${split}_labels.json`), JSON.stringify(xs.map((x) => x.label)));
  }
  writeFileSync(stamp, VERSION);
  return true;
}

/** The rows of a .jsonl file written above. */
export function readJsonl(file: string): { text: string; label?: string }[] {
  return readFileSync(path.join(DATA_DIR, file), "utf8")
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
}

if (import.meta.main) console.log(`prepare: ${prepare() ? "wrote" : "up to date"} ${DATA_DIR}`);
