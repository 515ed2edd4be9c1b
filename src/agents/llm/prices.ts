/**
 * List prices of a few hosted models, USD per million input / output tokens, used to put a
 * cost on a proposal. Approximate (cache discounts and batch prices are ignored) and as of
 * late 2025; a model that is not listed gets no costUsd rather than a guess.
 */
const PRICES: Record<string, Record<string, readonly [number, number]>> = {
  anthropic: {
    "claude-opus-4-5": [5, 25],
    "claude-opus-4-1": [15, 75],
    "claude-opus-4": [15, 75],
    "claude-sonnet-4-5": [3, 15],
    "claude-sonnet-4": [3, 15],
    "claude-3-7-sonnet": [3, 15],
    "claude-haiku-4-5": [1, 5],
    "claude-3-5-haiku": [0.8, 4],
  },
  openai: {
    "gpt-5": [1.25, 10],
    "gpt-5-mini": [0.25, 2],
    "gpt-5-nano": [0.05, 0.4],
    "gpt-4.1": [2, 8],
    "gpt-4.1-mini": [0.4, 1.6],
    "gpt-4.1-nano": [0.1, 0.4],
    "gpt-4o": [2.5, 10],
    "gpt-4o-mini": [0.15, 0.6],
    o3: [2, 8],
    "o4-mini": [1.1, 4.4],
  },
};

/** A dated snapshot of a listed model, e.g. claude-sonnet-4-5-20250929 or gpt-4o-2024-08-06. */
const SNAPSHOT = /^-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$/;

/** USD per million input and output tokens, when the model is listed for this provider. */
export function priceOf(provider: string, modelId: string): readonly [number, number] | undefined {
  const table = PRICES[provider];
  if (!table) return undefined;
  const exact = table[modelId];
  if (exact) return exact;
  for (const [id, price] of Object.entries(table)) {
    if (modelId.startsWith(id) && SNAPSHOT.test(modelId.slice(id.length))) return price;
  }
  return undefined;
}

export function costOf(
  provider: string,
  modelId: string,
  inputTokens: number | undefined,
  outputTokens: number | undefined,
  /** program.md's agent.price: wins over the table (an endpoint the table does not list). */
  configured?: { input: number; output: number },
): number | undefined {
  const price = configured ? ([configured.input, configured.output] as const) : priceOf(provider, modelId);
  if (!price || inputTokens === undefined || outputTokens === undefined) return undefined;
  return (inputTokens * price[0] + outputTokens * price[1]) / 1e6;
}
