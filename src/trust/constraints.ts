/**
 * Constraints: hard limits over metrics and costs, written in program.md as
 * `metric op number` (e.g. "peak_rss_mb <= 4096"). A trial that violates one is rejected
 * whatever its objective; a constraint whose metric was never reported is listed as missing,
 * so the caller decides what that means (it is not silently treated as a pass or a failure).
 */
import { AutolabError } from "../core/errors.ts";

export type ConstraintOp = "<=" | "<" | ">=" | ">" | "==" | "!=";

export interface Constraint {
  metric: string;
  op: ConstraintOp;
  value: number;
  /** Canonical text, `metric op value` with the value as written: used in every reason. */
  text: string;
}

export interface ConstraintCheck {
  /** False when at least one constraint is violated; missing metrics do not make it false. */
  ok: boolean;
  /** One human-readable reason per violated constraint. */
  violations: string[];
  /** One human-readable line per constraint whose metric was not reported. */
  missing: string[];
}

/**
 * A metric name as program.md and the metric lines on stdout may spell it. Shared with the
 * program schema so that every name a program mentions can also appear in a constraint.
 */
export const METRIC_NAME = /^[A-Za-z_][A-Za-z0-9_./-]*$/;

const OPS: readonly ConstraintOp[] = ["<=", "<", ">=", ">", "==", "!="];
// Operators people type by habit from other languages, and what they mean here.
const OP_FIXES: Record<string, ConstraintOp> = {
  "=": "==",
  "===": "==",
  "!==": "!=",
  "<>": "!=",
  "=<": "<=",
  "=>": ">=",
};
// The operator a violation is reported with: "5120 > 4096" for a failed "<= 4096".
const NEGATED: Record<ConstraintOp, string> = {
  "<=": ">",
  "<": ">=",
  ">=": "<",
  ">": "<=",
  "==": "!=",
  "!=": "==",
};
const FLIPPED: Record<ConstraintOp, ConstraintOp> = {
  "<=": ">=",
  "<": ">",
  ">=": "<=",
  ">": "<",
  "==": "==",
  "!=": "!=",
};
// Plain decimal numbers only: the unit belongs in the metric name (peak_rss_mb, wall_s).
const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
const SHAPE = /^\s*(.*?)\s*([<>=!]+)\s*(.*?)\s*$/s;
const EXAMPLE = "peak_rss_mb <= 4096";

function invalid(expr: string, what: string): AutolabError {
  return new AutolabError(
    "CONSTRAINT_INVALID",
    `invalid constraint "${expr}": ${what}`,
    `a constraint is \`metric op number\` with op one of ${OPS.join(" ")}, e.g. "${EXAMPLE}"`,
  );
}

/** Parses `metric op number`; throws AutolabError CONSTRAINT_INVALID saying what was expected. */
export function parseConstraint(expr: string): Constraint {
  if (typeof expr !== "string" || expr.trim() === "") {
    throw invalid(String(expr ?? ""), `it is empty; expected \`metric op number\`, e.g. "${EXAMPLE}"`);
  }
  const m = SHAPE.exec(expr);
  if (!m) {
    throw invalid(
      expr,
      `no comparison operator; expected one of ${OPS.join(" ")} between the metric and the number, e.g. "${EXAMPLE}"`,
    );
  }
  const [, left = "", rawOp = "", right = ""] = m;
  const known = OPS.find((o) => o === rawOp);
  if (!known) {
    const fix = OP_FIXES[rawOp];
    const suggestion = fix ? ` — did you mean "${left} ${fix} ${right}"?` : "";
    throw invalid(expr, `"${rawOp}" is not an operator; use one of ${OPS.join(" ")}${suggestion}`);
  }
  const op: ConstraintOp = known;
  if (left === "") throw invalid(expr, `no metric name before "${op}"`);
  if (!METRIC_NAME.test(left)) {
    // "4096 >= peak_rss_mb": say how to write it the supported way round.
    if (NUMBER.test(left) && METRIC_NAME.test(right)) {
      throw invalid(expr, `put the metric first: "${right} ${FLIPPED[op]} ${left}"`);
    }
    throw invalid(
      expr,
      `"${left}" is not a metric name (before "${op}"): use letters, digits, _ . - / and start with a letter or _`,
    );
  }
  if (right === "") throw invalid(expr, `no number after "${left} ${op}"`);
  if (!NUMBER.test(right)) {
    throw invalid(
      expr,
      `expected a plain number after "${left} ${op}", got "${right}" (units go in the metric name, e.g. "${EXAMPLE}")`,
    );
  }
  return { metric: left, op, value: Number(right), text: `${left} ${op} ${right}` };
}

function holds(op: ConstraintOp, x: number, v: number): boolean {
  switch (op) {
    case "<=":
      return x <= v;
    case "<":
      return x < v;
    case ">=":
      return x >= v;
    case ">":
      return x > v;
    case "==":
      return x === v;
    case "!=":
      return x !== v;
  }
}

/**
 * Checks measured values against constraints. A NaN value violates every constraint
 * (NaN satisfies no comparison but "!=", and a broken measurement must not pass a limit).
 */
export function checkConstraints(constraints: Constraint[], values: Record<string, number>): ConstraintCheck {
  const violations: string[] = [];
  const missing: string[] = [];
  for (const c of constraints) {
    const x = Object.hasOwn(values, c.metric) ? values[c.metric] : undefined;
    if (x === undefined) {
      missing.push(`${c.metric} was not reported (constraint ${c.text})`);
    } else if (Number.isNaN(x)) {
      violations.push(`${c.metric} is NaN (constraint ${c.text})`);
    } else if (!holds(c.op, x, c.value)) {
      violations.push(`${c.metric} ${x} ${NEGATED[c.op]} ${c.value} (constraint ${c.text})`);
    }
  }
  return { ok: violations.length === 0, violations, missing };
}
