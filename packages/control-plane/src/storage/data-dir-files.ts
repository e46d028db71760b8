import { DataDirFullError, isNoSpace } from "@keelson/db";

/**
 * Runs a write of a data-dir file, turning "no space" (ENOSPC, EDQUOT) into DataDirFullError:
 * the error storageFull recognises, so the request answers 507 naming the data dir. Only the
 * data dir's own writes go through here; an ENOSPC from elsewhere stays what it is.
 */
export function writingDataDir<T>(path: string, write: () => T): T {
  try {
    return write();
  } catch (err) {
    if (isNoSpace(err)) throw new DataDirFullError(path, err);
    throw err;
  }
}

/** writingDataDir for an asynchronous write. */
export async function writingDataDirAsync<T>(path: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isNoSpace(err)) throw new DataDirFullError(path, err);
    throw err;
  }
}
