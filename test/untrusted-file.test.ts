/**
 * The one door for untrusted files (src/core/untrusted-file.ts): what it reads, what it refuses
 * and why, and that a refusal never blocks (a FIFO without a writer, a device) or follows a link.
 */
import { execFileSync } from "node:child_process";
import {
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  freshDir,
  readUntrusted,
  readUntrustedText,
  refusedText,
  writeUntrusted,
} from "../src/core/untrusted-file.ts";

let dir = "";
let server: Server | undefined;
const SECRET = "the user's own file\n";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "untrusted-file-"));
  writeFileSync(join(dir, "plain.txt"), "hello\nworld\n");
  writeFileSync(join(dir, "secret.txt"), SECRET);
  symlinkSync(join(dir, "secret.txt"), join(dir, "link"));
  symlinkSync(join(dir, "nowhere"), join(dir, "dangling"));
  execFileSync("mkfifo", [join(dir, "fifo")]);
  mkdirSync(join(dir, "sub"));
  writeFileSync(join(dir, "big.bin"), Buffer.from("0123456789".repeat(100)));
  linkSync(join(dir, "secret.txt"), join(dir, "hard"));
  server = createServer();
  await new Promise<void>((res) => server?.listen(join(dir, "sock"), res));
});

afterAll(async () => {
  await new Promise<void>((res) => (server ? server.close(() => res()) : res()));
  rmSync(dir, { recursive: true, force: true });
});

const refusal = (name: string) => {
  const r = readUntrusted(name.startsWith("/") ? name : join(dir, name), { maxBytes: 1 << 20 });
  expect(r.ok, name).toBe(false);
  return r.ok ? "" : r.reason;
};

describe("readUntrusted", () => {
  it("reads a regular file whole", () => {
    const r = readUntrustedText(join(dir, "plain.txt"), { maxBytes: 100 });
    expect(r).toEqual({ ok: true, text: "hello\nworld\n", size: 12, truncated: false });
  });

  it("refuses a symlink (to a readable file, and a dangling one) without following it", () => {
    expect(refusal("link")).toBe("a symbolic link");
    expect(refusal("dangling")).toBe("a symbolic link");
  });

  it("refuses a FIFO without waiting for a writer", () => {
    expect(refusal("fifo")).toBe("not a regular file (a FIFO)");
  });

  it("refuses a socket, a directory and a device", () => {
    expect(refusal("sock")).toMatch(/^not a regular file \(a socket/);
    expect(refusal("sub")).toBe("not a regular file (a directory)");
    expect(refusal("/dev/zero")).toBe("not a regular file (a character device)");
  });

  it("refuses a file with a second name (a hard link to a file elsewhere)", () => {
    expect(refusal("hard")).toBe("a hard link (a file with 2 names)");
  });

  it("says when nothing is there", () => {
    const r = readUntrusted(join(dir, "absent"), { maxBytes: 10 });
    expect(r).toEqual({ ok: false, missing: true, reason: "missing" });
  });

  it("caps an oversized file at maxBytes, keeping its head or its tail", () => {
    const head = readUntrustedText(join(dir, "big.bin"), { maxBytes: 15 });
    expect(head).toEqual({ ok: true, text: "012345678901234", size: 1000, truncated: true });
    const tail = readUntrustedText(join(dir, "big.bin"), { maxBytes: 12, keep: "tail" });
    expect(tail).toEqual({ ok: true, text: "890123456789", size: 1000, truncated: true });
  });

  it("words a refusal for the record", () => {
    expect(refusedText("/a/b/agent.stderr.log", "a symbolic link")).toBe(
      "[refused: agent.stderr.log is a symbolic link; not read]",
    );
  });
});

describe("writeUntrusted", () => {
  it("writes (truncating) and appends to a regular file it creates", () => {
    const p = join(dir, "out.txt");
    writeUntrusted(p, "first, longer line\n");
    writeUntrusted(p, "second\n");
    writeUntrusted(p, "third\n", { append: true });
    expect(readFileSync(p, "utf8")).toBe("second\nthird\n");
  });

  it("refuses a symlink, a FIFO and a hard link, and leaves their targets as they were", () => {
    expect(() => writeUntrusted(join(dir, "link"), "x")).toThrow(/symbolic link/);
    expect(() => writeUntrusted(join(dir, "dangling"), "x")).toThrow(/symbolic link/);
    expect(existsSync(join(dir, "nowhere"))).toBe(false);
    expect(() => writeUntrusted(join(dir, "fifo"), "x")).toThrow(/socket or FIFO|FIFO/);
    expect(() => writeUntrusted(join(dir, "hard"), "x")).toThrow(/hard link/);
    expect(() => writeUntrusted(join(dir, "sub"), "x")).toThrow();
    expect(readFileSync(join(dir, "secret.txt"), "utf8")).toBe(SECRET);
  });
});

describe("freshDir", () => {
  it("never reuses what is already there: a directory, a file, a symlink", () => {
    const parent = join(dir, "logs", "7");
    expect(freshDir(parent, "agent")).toBe(join(parent, "agent"));
    expect(freshDir(parent, "agent")).toBe(join(parent, "agent-2"));
    symlinkSync(join(dir, "sub"), join(parent, "agent-3"));
    writeFileSync(join(parent, "agent-4"), "");
    expect(freshDir(parent, "agent")).toBe(join(parent, "agent-5"));
    expect(lstatSync(join(parent, "agent-3")).isSymbolicLink()).toBe(true);
  });
});
