/**
 * This control plane's URL as hosts reach it, for what is handed to them (download URLs, the
 * install script and command): KEELSON_PUBLIC_URL when set (a proxy in front), else the address
 * this request came to.
 */
export function baseUrlOf(publicUrl: string | undefined, request: { protocol: string; host: string }): string {
  return publicUrl?.replace(/\/+$/, "") || `${request.protocol}://${request.host}`;
}
