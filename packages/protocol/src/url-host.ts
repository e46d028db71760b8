/** An address as the host part of a URL: an IPv6 literal goes in brackets, anything else as it is. */
export function urlHost(address: string): string {
  return address.includes(":") ? `[${address}]` : address;
}
