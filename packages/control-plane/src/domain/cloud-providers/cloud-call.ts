import type { ApiError } from "../../http/errors.ts";

/**
 * One call into a cloud SDK under KEELSON_CLOUD_CALL_TIMEOUT_MS, for every cloud: the signal
 * aborts the SDK's request (and its retries), and the race answers even if something inside the
 * SDK does not listen to it. A failure becomes the API error the caller should see; the cloud's
 * module says which (a TimeoutError is what it gets when the time ran out).
 */
export async function cloudCall<T>(
  timeoutMs: number,
  call: (abortSignal: AbortSignal) => Promise<T>,
  apiErrorOf: (err: unknown) => ApiError,
): Promise<T> {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const timeout = Object.assign(new Error("deadline"), { name: "TimeoutError" });
      controller.abort(timeout);
      reject(timeout);
    }, timeoutMs);
  });
  try {
    return await Promise.race([call(controller.signal), deadline]);
  } catch (err) {
    throw apiErrorOf(err);
  } finally {
    clearTimeout(timer);
  }
}
