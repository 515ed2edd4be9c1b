import type { ErrorCode } from "./error-codes.ts";

/**
 * Errors a user can act on. Each has a stable code and a message that says what is wrong
 * and how to fix it. The CLI prints `message` (and `hint`) without a stack trace; anything
 * that is not an AutolabError is a bug and is printed with its stack. Codes, exit codes and
 * HTTP statuses: error-codes.ts.
 */
export class AutolabError extends Error {
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  constructor(code: ErrorCode, message: string, hint?: string) {
    super(message);
    this.name = "AutolabError";
    this.code = code;
    this.hint = hint;
  }
}

export function isAutolabError(err: unknown): err is AutolabError {
  return err instanceof AutolabError;
}
