import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { secretLeak } from "../src/core/candidate.ts";
import {
  isSecretName,
  redactKeyShapes,
  redactSecrets,
  refreshSecrets,
  SecretLineStream,
  SecretRedactor,
  secretValuesOf,
} from "../src/core/secrets.ts";
import type { Workspace } from "../src/core/workspace.ts";
import { CappedLog } from "../src/runner/capped-log.ts";

const OPENAI = `sk-proj-${"A1b2C3d4E5f6G7h8".repeat(3)}`;
const ANTHROPIC = `sk-ant-api03-${"Zz9Yy8Xx7Ww6".repeat(4)}-AA`;
const AWS = "AKIAIOSFODNN7EXAMPLE";
const GH = `ghp_${"a1B2c3D4e5F6".repeat(3)}`;
const GH_PAT = `github_pat_11ABCDEFG0${"xY7_zQ3".repeat(8)}`;
const SLACK = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx";
const PEM = `-----BEGIN RSA PRIVATE KEY-----
MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2xPp0Q0dPpQd
q9nK8x0Z2c3v4b5n6m7Q8w9e0r1t2y3u4i5o6p7a8s9d0f1g
-----END RSA PRIVATE KEY-----`;

describe("redactKeyShapes", () => {
  it("replaces every key shape", () => {
    for (const key of [OPENAI, ANTHROPIC, AWS, GH, GH_PAT, SLACK]) {
      const out = redactKeyShapes(`use ${key} now`);
      expect(out, key).toBe("use [redacted:key] now");
    }
    expect(redactKeyShapes(`a\n${PEM}\nb`)).toBe("a\n[redacted:key]\nb");
    // Cut short, and inside JSON: redacted up to the end of its body, the JSON still parses.
    const cut = JSON.stringify({ log: PEM.slice(0, 120), n: 1 });
    expect(JSON.parse(redactKeyShapes(cut))).toEqual({ log: "[redacted:key]", n: 1 });
    expect(JSON.parse(redactKeyShapes(JSON.stringify({ log: `x ${PEM} y` })))).toEqual({
      log: "x [redacted:key] y",
    });
    expect(
      JSON.parse(redactKeyShapes(JSON.stringify({ a: 'token="f3K9x2LqP0zR7vB1nM4c"', b: "pg://u:pw12@h" }))),
    ).toEqual({
      a: 'token="[redacted:key]"',
      b: "pg://u:[redacted:key]@h",
    });
    expect(redactKeyShapes("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.q9X2")).toBe(
      "Authorization: Bearer [redacted:key]",
    );
    expect(redactKeyShapes("postgres://lab:S3cr3t-pw@db.local/lab")).toBe(
      "postgres://lab:[redacted:key]@db.local/lab",
    );
    expect(redactKeyShapes("OPENAI_API_KEY=Zq7pLw2Xv9Fake4Tn8Rk3Ms")).toBe("OPENAI_API_KEY=[redacted:key]");
    expect(redactKeyShapes('{"token": "f3K9x2LqP0zR7vB1nM4c"}')).toBe('{"token": "[redacted:key]"}');
    expect(redactKeyShapes("password: hunter2Hunter2xyz!")).toBe("password: [redacted:key]");
    expect(redactKeyShapes("secret=4b9d2e7f1a0c3b8e6d5f4a1c")).toBe("secret=[redacted:key]");
  });

  it("leaves normal text alone: shas, UUIDs, digests, base64, numbers, words, paths", () => {
    const normal = [
      "commit 1f0e3dad99908345f7439f8ffabdffc4 and 9ae63d6 (git sha)",
      "3c8a7e0f9b1d2c4e5f60718293a4b5c6d7e8f901",
      `run ${randomUUID()} started`,
      `sha256 ${randomBytes(32).toString("hex")}`,
      `data:${randomBytes(48).toString("base64")}`,
      `blob ${randomBytes(24).toString("base64url")}`,
      "score: 0.123456789 loss=1e-4 tokens_per_sec: 12345.678",
      "api_key: see the docs for how to set it",
      "token = 12345678901234567890",
      "secret = /home/user/.config/secret-file",
      "the monkey=abcdefGHIJ123456 stays",
      `{"evaluate.py":"${"ab".repeat(32)}","api_token":"${"cd".repeat(32)}"}`,
      "https://example.com/path?x=1 and git@github.com:o/r.git",
      "keys: [a, b] tokenizer: bpe, password-less login",
      "sk-learn is not a key; skip sk-1",
      "Bearer token missing",
    ];
    for (const t of normal) expect(redactKeyShapes(t), t).toBe(t);
  });
});

describe("SecretRedactor", () => {
  it("replaces known values by their variable's name, longest first", () => {
    const r = new SecretRedactor(
      new Map([
        ["A_TOKEN", "plainvalue123"],
        ["B_TOKEN", "plainvalue123456"],
      ]),
    );
    expect(r.redact("x plainvalue123456 y plainvalue123 z")).toBe(
      "x [redacted:B_TOKEN] y [redacted:A_TOKEN] z",
    );
    expect(r.redactDeep({ a: ["plainvalue123"], n: 3 })).toEqual({ a: ["[redacted:A_TOKEN]"], n: 3 });
  });

  it("takes secret values from variables named like credentials, and the registered names", () => {
    const env = {
      OPENAI_API_KEY: "Zq7pLw2Xv9Fake",
      GITHUB_TOKEN: "tokenvalue99",
      DB_PASSWORD: "hunter2hunter2",
      SHORT_TOKEN: "1",
      HOME: "/home/u",
      MY_CRED: "registeredvalue",
    };
    expect([...secretValuesOf(env, ["MY_CRED"]).keys()].sort()).toEqual([
      "DB_PASSWORD",
      "GITHUB_TOKEN",
      "MY_CRED",
      "OPENAI_API_KEY",
    ]);
  });
});

describe("SecretLineStream", () => {
  const r = new SecretRedactor(new Map([["OPENAI_API_KEY", "Zq7pLw2Xv9FakeValue"]]));
  const stream = () => new SecretLineStream({ redactor: () => r });

  it("finds a value split across chunks", () => {
    const s = stream();
    const out = s.push("line 1\nkey Zq7pLw2") + s.push("Xv9FakeValue end\n") + s.push("tail") + s.flush();
    expect(out).toBe("line 1\nkey [redacted:OPENAI_API_KEY] end\ntail");
  });

  it("drops a PEM block written in pieces", () => {
    const s = stream();
    const lines = `before\n${PEM}\nafter\n`;
    let out = "";
    for (let i = 0; i < lines.length; i += 7) out += s.push(lines.slice(i, i + 7));
    out += s.flush();
    expect(out).toBe("before\n[redacted:key]\n\nafter\n");
  });

  it("writes a long line without a newline once it passes the cap", () => {
    const s = new SecretLineStream({ maxPending: 16, redactor: () => r });
    expect(s.push("0123456789")).toBe("");
    expect(s.push("0123456789")).toBe("01234567890123456789");
  });
});

describe("CappedLog: the log writer redacts", () => {
  const dir = mkdtempSync(join(tmpdir(), "autolab-secrets-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("a process's secret value and key shapes never reach the file, whatever the chunks", () => {
    const name = "AUTOLAB_TEST_SECRET_TOKEN";
    const value = "Vq3Lm8Zx1Fake0Secret7Value";
    process.env[name] = value;
    refreshSecrets();
    try {
      const path = join(dir, "a.log");
      const log = new CappedLog(path, 1024 * 1024);
      const text = `start ✓ é\nvalue ${value} and ${OPENAI}\n${PEM}\nlast line without newline ${value}`;
      const bytes = Buffer.from(text);
      // Three bytes at a time: every secret and every multi-byte character is split.
      for (let i = 0; i < bytes.length; i += 3) log.write(bytes.subarray(i, i + 3));
      log.close();
      const out = readFileSync(path, "utf8");
      expect(out).not.toContain(value);
      expect(out).not.toContain(OPENAI);
      expect(out).not.toContain("MIIEpAIBAAKCAQEA");
      expect(out).toBe(
        `start ✓ é\nvalue [redacted:${name}] and [redacted:key]\n[redacted:key]\n\nlast line without newline [redacted:${name}]`,
      );
      expect(log.bytes).toBe(bytes.length);
      expect(redactSecrets(`x ${value}`)).toBe(`x [redacted:${name}]`);
    } finally {
      delete process.env[name];
      refreshSecrets();
    }
  });

  it("caps what it writes after redaction, with the elision marker", () => {
    const path = join(dir, "b.log");
    const log = new CappedLog(path, 4096);
    for (let i = 0; i < 2000; i++) log.write(Buffer.from(`line ${i} ${i % 100 === 0 ? OPENAI : ""}\n`));
    log.close();
    const out = readFileSync(path, "utf8");
    expect(Buffer.byteLength(out)).toBeLessThanOrEqual(4096);
    expect(out).toMatch(/\n\[autolab: \d+ bytes elided\]\n/);
    expect(out.endsWith("line 1999 \n")).toBe(true);
    expect(out).not.toContain(OPENAI);
  });
});

describe("secretLeak: a candidate's files before the commit", () => {
  const dir = mkdtempSync(join(tmpdir(), "autolab-leak-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const ws = (parent: Record<string, string>) =>
    ({ worktree: dir, fileAt: async (_c: string, p: string) => parent[p] }) as unknown as Workspace;

  it("rewrites a file that gained a secret, and says so; a secret the parent held already is the project's", async () => {
    writeFileSync(join(dir, "train.py"), `# key ${OPENAI}\nx = 1\n`);
    writeFileSync(join(dir, "fixture.py"), `TOKEN = "${GH}"\ny = 2\n`);
    writeFileSync(join(dir, "clean.py"), "z = 3\n");
    const reason = await secretLeak(ws({ "fixture.py": `TOKEN = "${GH}"\n` }), "p", [
      "train.py",
      "fixture.py",
      "clean.py",
      "gone.py",
    ]);
    expect(reason).toMatch(/^secret: .* into train\.py;/);
    expect(readFileSync(join(dir, "train.py"), "utf8")).toBe("# key [redacted:key]\nx = 1\n");
    expect(readFileSync(join(dir, "fixture.py"), "utf8")).toContain(GH);
    expect(await secretLeak(ws({}), "p", ["clean.py"])).toBeUndefined();
  });

  it("follows no link", async () => {
    writeFileSync(join(dir, "target.txt"), `${OPENAI}\n`);
    symlinkSync(join(dir, "target.txt"), join(dir, "link.py"));
    expect(await secretLeak(ws({}), "p", ["link.py"])).toBeUndefined();
    expect(readFileSync(join(dir, "target.txt"), "utf8")).toBe(`${OPENAI}\n`);
  });
});

it("the runner's AUTOLAB_TRIAL_TOKEN is an id, not a credential: left as it is", () => {
  const line =
    'ENV {"AUTOLAB_TRIAL_TOKEN":"hub-f233c0dba3505f59d302941cad686e27","MY_TOKEN":"hub-f233c0dba3505f59d302941cad686e27"}';
  const out = redactSecrets(line);
  expect(out).toContain('"AUTOLAB_TRIAL_TOKEN":"hub-f233c0dba3505f59d302941cad686e27"');
  expect(out).toContain('"MY_TOKEN":"[redacted:key]"');
  expect(isSecretName("AUTOLAB_TRIAL_TOKEN")).toBe(false);
});

it("a database address whose password is already masked is left as it is", () => {
  expect(redactSecrets("Workers (postgres://me:***@db/lab): 2 live")).toBe(
    "Workers (postgres://me:***@db/lab): 2 live",
  );
  expect(redactSecrets("postgres://me:hunter2hunter2@db/lab")).not.toContain("hunter2");
});

it("a value already redacted is not redacted again", () => {
  expect(redactSecrets("own key=[[redacted:AUTOLAB_TEST_AGENT_KEY]]")).toBe(
    "own key=[[redacted:AUTOLAB_TEST_AGENT_KEY]]",
  );
});
