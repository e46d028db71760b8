// The types of bundle.mjs, which stays plain JavaScript: it runs before anything can load TypeScript.
/** The digest of the sources a bundle is built from (its folder's name under dist/). */
export function sourcesDigest(packageDir: string): string;
/** The folder of the bundle of `packageDir`'s current sources, built first when there is none. */
export function readyBundle(packageDir: string): string;
/** Builds the bundle of `packageDir`'s sources into dist/<digest>/ and returns that folder. */
export function buildBundle(packageDir: string): Promise<string>;
