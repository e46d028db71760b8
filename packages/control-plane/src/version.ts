import manifest from "../package.json" with { type: "json" };

/** This keelson-server's release: the API document's version and what a schema may require (keelson_schema). */
export const SERVER_VERSION: string = manifest.version;
