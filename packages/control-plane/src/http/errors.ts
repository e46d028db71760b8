/**
 * The one error shape of the API (DESIGN.md "Conventions"):
 * `{ code, message, field? }`. Domain modules throw these; the error handler renders them.
 */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly field?: string,
    /** Response headers that belong to the error (Retry-After of a 429); the error handler sends them. */
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
    this.name = "ApiError";
  }

  toJSON(): { code: string; message: string; field?: string } {
    return this.field === undefined
      ? { code: this.code, message: this.message }
      : { code: this.code, message: this.message, field: this.field };
  }
}

export const badRequest = (field: string, message: string, code = "invalid_field") =>
  new ApiError(400, code, message, field);
export const forbidden = (message = "a valid X-Auth-Token for this project is required") =>
  new ApiError(403, "forbidden", message);
export const notFound = (what: string, id: string) => new ApiError(404, "not_found", `${what} ${id} does not exist`);
export const conflict = (message: string, code = "conflict") => new ApiError(409, code, message);
