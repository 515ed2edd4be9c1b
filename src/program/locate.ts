/**
 * Maps a field path (as zod reports it) back to a line of the YAML source, so an error can
 * say "program.md:7". When the path does not exist in the source (a missing key), the line
 * of its deepest existing ancestor is used: that is where the key has to be added.
 */
import { type Document, isMap, isScalar, isSeq, type LineCounter } from "yaml";

export type FieldPath = readonly (string | number)[];

/** 1-based line within the YAML text, or undefined for an empty document. */
export function locateLine(doc: Document, lines: LineCounter, path: FieldPath): number | undefined {
  let node: unknown = doc.contents;
  let offset = isNodeWithRange(node) ? node.range[0] : undefined;
  for (const seg of path) {
    if (isMap(node)) {
      const pair = node.items.find((p) => isScalar(p.key) && String(p.key.value) === String(seg));
      if (!pair) break;
      // Point at the key, not the value: a block list's value starts on the next line.
      if (isNodeWithRange(pair.key)) offset = pair.key.range[0];
      node = pair.value;
    } else if (isSeq(node) && typeof seg === "number") {
      const item = node.items[seg];
      if (!isNodeWithRange(item)) break;
      offset = item.range[0];
      node = item;
    } else {
      break;
    }
  }
  return offset === undefined ? undefined : lines.linePos(offset).line;
}

function isNodeWithRange(x: unknown): x is { range: [number, number, number] } {
  return typeof x === "object" && x !== null && Array.isArray((x as { range?: unknown }).range);
}
