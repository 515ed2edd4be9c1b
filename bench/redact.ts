/**
 * What the secret redactor (src/core/secrets.ts, docs/security.md "Secrets are never recorded")
 * costs on its two hot paths: every string the notebook writes (the Sql seam) and every byte a
 * trial or researcher logs (CappedLog, a line at a time). Measured with a process environment
 * holding 4 secret values (the redactor's typical load), on:
 *
 * - notebook strings: 10,000 hypotheses/reasons of ~200 characters, half of them with words the
 *   pre-test stops at (`key`, `token`), none with a secret (the common case): µs per string;
 * - logs: 20 MB of training-log lines (`step 123 loss 2.345 tokens/s 12345 lr 3e-4`) through
 *   SecretLineStream in 64 KiB chunks: MB/s, against plain UTF-8 decoding of the same chunks.
 */
import { StringDecoder } from "node:string_decoder";
import { SecretLineStream, SecretRedactor } from "../src/core/secrets.ts";

export async function main(): Promise<Record<string, number | string>> {
  const redactor = new SecretRedactor(
    new Map([
      ["OPENAI_API_KEY", "Zq7pLw2Xv9FakeOpenaiValue4Tn8Rk3Ms"],
      ["ANTHROPIC_API_KEY", "Hd5Yc1NvQ8FakeLabCredential6Bx0Wj"],
      ["GITHUB_TOKEN", "Pq0Rs9Tu8Vw7Xy6Za5Bc4De3Fg"],
      ["PGPASSWORD", "hunter2hunter2"],
    ]),
  );
  const texts = Array.from({ length: 10_000 }, (_, i) =>
    i % 2
      ? `#${i} raise the learning rate warmup to ${i} steps with cosine decay; the token budget and key schedule stay as they were, expecting a lower val_bpb after ${i % 7} epochs`
      : `#${i} halve HIDDEN to ${i % 512} units and double the batch: smaller models train faster within the fixed budget, so more steps fit before the deadline (${i})`,
  );
  let sink = 0;
  for (const t of texts.slice(0, 1000)) sink += redactor.redact(t).length; // warm-up
  const t0 = performance.now();
  for (let round = 0; round < 5; round++) for (const t of texts) sink += redactor.redact(t).length;
  const perStringUs = ((performance.now() - t0) * 1000) / (texts.length * 5);

  const line = (i: number) =>
    `step ${i} loss ${(2 + Math.sin(i) / 3).toFixed(4)} tokens/s ${12000 + (i % 999)} lr 3e-4\n`;
  const chunks: Buffer[] = [];
  let total = 0;
  let buf = "";
  for (let i = 0; total < 20 * 1024 * 1024; i++) {
    buf += line(i);
    if (buf.length >= 64 * 1024) {
      const b = Buffer.from(buf);
      chunks.push(b);
      total += b.length;
      buf = "";
    }
  }
  const plain = () => {
    const d = new StringDecoder("utf8");
    const start = performance.now();
    for (const c of chunks) sink += d.write(c).length;
    return performance.now() - start;
  };
  const redacted = () => {
    const d = new StringDecoder("utf8");
    const s = new SecretLineStream({ redactor: () => redactor });
    const start = performance.now();
    for (const c of chunks) sink += Buffer.from(s.push(d.write(c))).length;
    sink += s.flush().length;
    return performance.now() - start;
  };
  plain();
  redacted();
  const plainMs = Math.min(plain(), plain(), plain());
  const redactedMs = Math.min(redacted(), redacted(), redacted());
  const mb = total / (1024 * 1024);
  const figures = {
    benchmark: "redact",
    notebook_string_us: Math.round(perStringUs * 100) / 100,
    log_mb: Math.round(mb),
    log_redacted_mb_per_s: Math.round(mb / (redactedMs / 1000)),
    log_decode_only_mb_per_s: Math.round(mb / (plainMs / 1000)),
    sink: sink > 0 ? "ok" : "none",
  };
  console.log(
    `notebook strings: ${figures.notebook_string_us} µs each; logs: ${figures.log_redacted_mb_per_s} MB/s redacted (decoding alone ${figures.log_decode_only_mb_per_s} MB/s) over ${figures.log_mb} MB`,
  );
  return figures;
}
