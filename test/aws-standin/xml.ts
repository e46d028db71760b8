/** STAND-IN, for tests: the little XML writing the AWS stand-in needs (answers, never parsing). */
export function escapeXml(text: string): string {
  return text.replace(/[<>&'"]/g, (c) => `&${{ "<": "lt", ">": "gt", "&": "amp", "'": "apos", '"': "quot" }[c]};`);
}

/** `<name>…</name>`; a string is text (escaped), an array is child elements already written. */
export function el(name: string, content: string | number | boolean | string[]): string {
  const inner = Array.isArray(content) ? content.join("") : escapeXml(String(content));
  return `<${name}>${inner}</${name}>`;
}

/** EC2's list shape: `<name><item>…</item>…</name>`. */
export function items(name: string, entries: string[][]): string {
  return el(
    name,
    entries.map((fields) => el("item", fields)),
  );
}

export const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';
