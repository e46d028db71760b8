/**
 * Exit codes scripts can rely on, and the errors that carry them. Commands throw; main.ts
 * prints the message and exits with the error's code.
 */
export const EXIT = {
  ok: 0,
  /** The operation failed or the API refused the request. */
  failed: 1,
  /** Bad usage: unknown command or flag, missing argument, bad setting or spec file. */
  usage: 2,
  /** The control plane could not be reached, or refused the credentials. */
  unreachable: 3,
  /** Watching stopped by Ctrl-C (the shell's convention, 128 + SIGINT). */
  interrupted: 130,
} as const;

export class CliError extends Error {
  override name = "CliError";
  constructor(
    message: string,
    readonly exitCode: number = EXIT.failed,
  ) {
    super(message);
  }
}

export const usageError = (message: string) => new CliError(message, EXIT.usage);

/** An answer of the API in its `{code, message, field}` shape. */
export class ApiRefusal extends CliError {
  override name = "ApiRefusal";
  constructor(
    readonly status: number,
    readonly code: string,
    readonly apiMessage: string,
    readonly field?: string,
  ) {
    const where = field ? ` (field ${field})` : "";
    const exit = status === 401 || status === 403 ? EXIT.unreachable : EXIT.failed;
    const hint = exit === EXIT.unreachable ? "; log in again with `keelson login` or check the token" : "";
    super(`${status} ${code}: ${apiMessage}${where}${hint}`, exit);
  }
}
