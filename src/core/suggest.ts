/** "Did you mean" for misspelt keys, values and metric names (program.md's reporter, the loop's errors). */

export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      cur[j] = Math.min((prev[j] ?? 0) + 1, (cur[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
    }
    prev = cur;
  }
  return prev[b.length] ?? 0;
}

// Case, `_` and `-` do not count: setupTimeout, setup-timeout and SETUP_TIMEOUT all mean setup_timeout.
function fold(s: string): string {
  return s.toLowerCase().replace(/[_-]/g, "");
}

/**
 * The candidate closest to `word`, if it is close enough to be a plausible typo: at most one
 * edit for short words, about one edit per three characters for longer ones.
 */
export function closest(word: string, candidates: readonly string[]): string | undefined {
  const w = fold(word);
  let best: string | undefined;
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const c of candidates) {
    const d = editDistance(w, fold(c));
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  const allowed = Math.max(1, Math.floor(w.length / 3));
  return bestDistance <= allowed ? best : undefined;
}
