/** A Markdown table of the benches' figures, each column as wide as its widest cell. */
export function markdownTable(head: string[], lines: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => (l[i] as string).length)));
  const row = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i] as number)).join(" | ")} |`;
  return [row(head), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...lines.map(row)].join("\n");
}
