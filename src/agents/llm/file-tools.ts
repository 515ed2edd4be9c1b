import { lstat, mkdir, readdir } from "node:fs/promises";
import { isAbsolute, join, posix, relative, sep } from "node:path";
import { tool } from "ai";
import { z } from "zod";
import { fileRules, isGlob, matchedFiles } from "../../core/file-patterns.ts";
import type { Program } from "../../core/types.ts";
import { readUntrusted, writeUntrusted } from "../../core/untrusted-file.ts";

/**
 * The llm researcher's hands: list, read, edit and write files of the project, and finish.
 *
 * Whatever the model asks, these tools change only the program's editable files and read only
 * inside the project, never through a symlink, never under .git or .autolab, never holdout data. A refusal is
 * thrown as an error, which the AI SDK hands back to the model as the tool's result, so the model
 * can correct itself; it never ends the proposal. (The loop's scope check after `propose` stays
 * the authority: these rules only keep a well-meaning model on the path.)
 */

/** Most characters read_file returns at once; the model pages on with start_line. */
export const READ_LIMIT_CHARS = 60_000;
/** Files larger than this are not read at all. */
const MAX_FILE_BYTES = 8 * 1024 * 1024;
const LIST_LIMIT = 200;

/** What the model claimed with finish: the experiment's summary. */
export interface FinishSummary {
  hypothesis: string;
  mechanism: string;
  expected?: string;
}

/** Filled in by the tools while the model works. */
export interface ToolState {
  finished?: FinishSummary;
  /** Files changed by edit_file / write_file, in order. */
  changed: string[];
}

class Refusal extends Error {
  override name = "Refusal";
}

function refuse(message: string): never {
  throw new Refusal(message);
}

export function createFileTools(root: string, program: Program, state: ToolState) {
  const editable = program.files.editable;
  const protectedPaths = program.files.protected;
  // One matcher for files: entries (paths, directories, globs: src/core/file-patterns.ts).
  const rules = fileRules(program.files);
  const isProtected = rules.protected;
  const editableList = editable.join(", ");

  /** The model's path as a clean path relative to the project root, or a refusal. */
  const toRel = (path: string): string => {
    let p = path.trim().replace(/\\/g, "/");
    if (!p) refuse("the path is empty.");
    const outside = `${path} is outside the project: use a path relative to the project root, e.g. ${editable[0]}.`;
    if (isAbsolute(p)) {
      const r = relative(root, p);
      if (r === ".." || r.startsWith(`..${sep}`) || isAbsolute(r)) refuse(outside);
      p = r.split(sep).join("/");
    }
    const n = posix
      .normalize(p)
      .replace(/^(?:\.\/)+/, "")
      .replace(/\/+$/, "");
    if (n === "" || n === ".") refuse(`${path} is the project root, not a file.`);
    if (n === ".." || n.startsWith("../")) refuse(outside);
    if (n.split("/").some((part) => part === ".git" || part === ".autolab")) {
      refuse(`${n} is off limits: nothing under .git or .autolab may be read or written.`);
    }
    // Holdout data never reaches a researcher, whatever the path it is asked by.
    if (rules.holdout(n))
      refuse(`${n} is holdout data: hidden from researchers, only the evaluation reads it.`);
    return n;
  };

  /** What is at `rel`, after checking that no part of the path is a symlink. */
  const kindOf = async (rel: string): Promise<"file" | "dir" | "missing" | "other"> => {
    const parts = rel.split("/");
    let abs = root;
    for (let i = 0; i < parts.length; i++) {
      abs = join(abs, parts[i] as string);
      let st: Awaited<ReturnType<typeof lstat>>;
      try {
        st = await lstat(abs);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === "ENOENT") return "missing";
        throw err;
      }
      const sofar = parts.slice(0, i + 1).join("/");
      if (st.isSymbolicLink()) refuse(`${sofar} is a symbolic link; links are not followed.`);
      if (i === parts.length - 1) return st.isFile() ? "file" : st.isDirectory() ? "dir" : "other";
      if (!st.isDirectory()) refuse(`${sofar} is not a directory.`);
    }
    return "missing";
  };

  const mustBeEditable = (rel: string, verb: string): void => {
    if (rules.editable(rel)) return;
    if (isProtected(rel)) {
      refuse(
        `${rel} is protected (read-only): the harness uses it to run and score experiments, so it cannot be ${verb}. Editable files: ${editableList}.`,
      );
    }
    refuse(`${rel} is not an editable file and cannot be ${verb}. Editable files: ${editableList}.`);
  };

  const readText = async (rel: string): Promise<string> => {
    // The worktree is written by trials and other processes: read through the one door.
    const r = readUntrusted(join(root, rel), { maxBytes: MAX_FILE_BYTES });
    if (!r.ok) refuse(`${rel} is ${r.reason}; it is not read.`);
    if (r.truncated) refuse(`${rel} is ${r.size} bytes, too large to read.`);
    const buf = r.bytes;
    if (buf.subarray(0, 8192).includes(0)) refuse(`${rel} is a binary file.`);
    return buf.toString("utf8");
  };

  // Written through the one door too: a symlink, FIFO or hard link put there since kindOf looked
  // is refused, not written through.
  const writeText = (rel: string, text: string): void => {
    try {
      writeUntrusted(join(root, rel), text);
    } catch (err) {
      refuse(`${rel} could not be written: ${(err as Error).message}`);
    }
  };

  const describeEntry = async (rel: string): Promise<string> => {
    try {
      const kind = await kindOf(rel);
      if (kind === "missing") return `${rel}  (does not exist yet)`;
      const st = await lstat(join(root, rel));
      return kind === "dir" ? `${rel}/  (directory)` : `${rel}  ${st.size} bytes`;
    } catch (err) {
      return `${rel}  (${(err as Error).message})`;
    }
  };

  return {
    list_files: tool({
      description:
        "List the project's files: the editable ones (you may change these), the protected ones (read-only) and the other entries at the top level. Sizes in bytes.",
      inputSchema: z.object({}),
      execute: async () => {
        // A glob is shown with the files it matches now (holdout files never).
        const describe = async (p: string, keep: (rel: string) => boolean): Promise<string[]> => {
          if (!isGlob(p)) return [`  ${await describeEntry(p)}`];
          const files = matchedFiles(root, [p], (f) => keep(f) && !rules.holdout(f));
          if (files.length === 0) return [`  ${p}  (glob; matches no file yet)`];
          return [
            `  ${p}  (glob):`,
            ...(await Promise.all(files.map(async (f) => `    ${await describeEntry(f)}`))),
          ];
        };
        const lines = ["Editable (you may change these):"];
        for (const p of editable) lines.push(...(await describe(p, rules.editable)));
        if (protectedPaths.length) {
          lines.push("Protected (read-only; the harness runs and scores experiments with them):");
          for (const p of protectedPaths) lines.push(...(await describe(p, () => true)));
        }
        const listed = new Set([...editable, ...protectedPaths]);
        const others = (await readdir(root, { withFileTypes: true }))
          .filter((d) => d.name !== ".git" && d.name !== ".autolab" && !listed.has(d.name))
          .filter((d) => !rules.holdout(d.name))
          .map((d) => (d.isDirectory() ? `${d.name}/` : d.name))
          .sort();
        if (others.length) {
          lines.push("Other entries at the top level (read-only):");
          for (const o of others.slice(0, LIST_LIMIT)) lines.push(`  ${o}`);
          if (others.length > LIST_LIMIT) lines.push(`  … and ${others.length - LIST_LIMIT} more`);
        }
        return lines.join("\n");
      },
    }),

    read_file: tool({
      description: `Read a text file of the project (any file, including protected ones). Returns its exact content, at most ${READ_LIMIT_CHARS} characters at a time; pass start_line to read further.`,
      inputSchema: z.object({
        path: z.string().describe("Path relative to the project root, e.g. train.py"),
        start_line: z.number().int().min(1).optional().describe("First line to return (1-based); default 1"),
      }),
      execute: async ({ path, start_line }) => {
        const rel = toRel(path);
        const kind = await kindOf(rel);
        if (kind === "missing") refuse(`${rel} does not exist. list_files shows the project's files.`);
        if (kind === "dir") {
          const entries = (await readdir(join(root, rel), { withFileTypes: true }))
            .filter((d) => !rules.holdout(`${rel}/${d.name}`))
            .map((d) => (d.isDirectory() ? `${d.name}/` : d.name))
            .sort();
          refuse(`${rel} is a directory. Its entries: ${entries.slice(0, LIST_LIMIT).join(", ")}`);
        }
        if (kind !== "file") refuse(`${rel} is not a regular file.`);
        const text = await readText(rel);
        const from = (start_line ?? 1) - 1;
        if (from === 0 && text.length <= READ_LIMIT_CHARS) return text;
        // Lines with their line ends, so that the pages put together are the file.
        const lines = text.match(/[^\n]*\n|[^\n]+$/g) ?? [];
        if (from >= lines.length) refuse(`${rel} has only ${lines.length} lines.`);
        let out = "";
        let to = from;
        while (to < lines.length && out.length + (lines[to] as string).length <= READ_LIMIT_CHARS) {
          out += lines[to];
          to++;
        }
        if (to === from) {
          // One line longer than a page: show its start.
          out = (lines[from] as string).slice(0, READ_LIMIT_CHARS);
          to = from + 1;
        }
        if (to >= lines.length) return out;
        return `${out}\n[… truncated: this shows lines ${from + 1}-${to} of ${lines.length}. Call read_file with start_line=${to + 1} to read on.]`;
      },
    }),

    edit_file: tool({
      description:
        "Change an editable file by replacing one exact piece of text. old_text must occur exactly once in the file, character for character (whitespace and indentation included); include enough surrounding lines to make it unique.",
      inputSchema: z.object({
        path: z.string().describe("Path of an editable file, relative to the project root"),
        old_text: z.string().describe("The exact text to replace; it must occur exactly once"),
        new_text: z.string().describe("The replacement text"),
      }),
      execute: async ({ path, old_text, new_text }) => {
        const rel = toRel(path);
        mustBeEditable(rel, "edited");
        const kind = await kindOf(rel);
        if (kind === "missing") refuse(`${rel} does not exist yet: create it with write_file.`);
        if (kind !== "file") refuse(`${rel} is not a regular file.`);
        if (old_text === "") refuse("old_text is empty: give the exact text to replace (or use write_file).");
        if (old_text === new_text) refuse("old_text and new_text are the same: nothing would change.");
        const text = await readText(rel);
        const at = text.indexOf(old_text);
        if (at < 0) {
          refuse(
            `old_text was not found in ${rel}. It must match the file exactly, including whitespace and indentation; read_file shows the current content.`,
          );
        }
        const count = text.split(old_text).length - 1;
        if (count > 1) {
          refuse(
            `old_text occurs ${count} times in ${rel}; include more surrounding text so that it is unique.`,
          );
        }
        // Not String.replace: "$&" and friends in new_text must stay literal.
        writeText(rel, text.slice(0, at) + new_text + text.slice(at + old_text.length));
        state.changed.push(rel);
        const n = (s: string) => s.split("\n").length;
        return `Edited ${rel}: replaced ${n(old_text)} line(s) with ${n(new_text)} line(s).`;
      },
    }),

    write_file: tool({
      description:
        "Replace the whole content of an editable file (or create it, if it is editable and does not exist yet). Prefer edit_file for small changes.",
      inputSchema: z.object({
        path: z.string().describe("Path of an editable file, relative to the project root"),
        content: z.string().describe("The complete new content of the file"),
      }),
      execute: async ({ path, content }) => {
        const rel = toRel(path);
        mustBeEditable(rel, "written");
        const kind = await kindOf(rel);
        if (kind !== "file" && kind !== "missing") refuse(`${rel} is not a regular file.`);
        if (kind === "missing") await mkdir(join(root, posix.dirname(rel)), { recursive: true });
        writeText(rel, content);
        state.changed.push(rel);
        return `Wrote ${rel} (${Buffer.byteLength(content)} bytes).`;
      },
    }),

    finish: tool({
      description:
        "End your turn once your change is in the files. The harness then runs the experiment and keeps the change only if the metric improves. Call it exactly once, at the end.",
      inputSchema: z.object({
        hypothesis: z
          .string()
          .min(1)
          .describe(
            "One line: what you changed and what you expect, e.g. 'lower LR 3e-3 → 1e-3: less divergence'",
          ),
        mechanism: z.string().describe("Why the change should improve the metric"),
        expected: z.string().optional().describe("The value of the metric you expect, or the direction"),
      }),
      execute: async ({ hypothesis, mechanism, expected }) => {
        if (!hypothesis.trim()) refuse("hypothesis is empty: say in one line what you changed and why.");
        state.finished = {
          hypothesis: hypothesis.trim(),
          mechanism: mechanism.trim(),
          ...(expected?.trim() ? { expected: expected.trim() } : {}),
        };
        return "Recorded. The harness will now run the experiment.";
      },
    }),
  };
}
