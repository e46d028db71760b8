import type { Page } from "playwright-core";

/**
 * Text contrast as WCAG 2.2 measures it, on a page as Chromium rendered it.
 *
 * Success criterion 1.4.3 Contrast (Minimum), level AA (https://www.w3.org/TR/WCAG22/#contrast-minimum):
 * text and images of text have a contrast ratio of at least 4.5:1, large text at least 3:1.
 * "Large scale" text is at least 18 point, or 14 point bold (WCAG 2.2 glossary; 1 pt = 4/3 CSS px,
 * so 24 px, or 18.66 px at weight 700 or more).
 *
 * Contrast ratio (glossary): (L1 + 0.05) / (L2 + 0.05), L1 the relative luminance of the lighter
 * colour, L2 of the darker. Relative luminance (glossary): L = 0.2126 R + 0.7152 G + 0.0722 B,
 * each of R, G, B from its 8-bit sRGB value c/255 as c/12.92 when c ≤ 0.04045, else
 * ((c + 0.055) / 1.055) ^ 2.4. (WCAG 2.2 gives 0.04045; older texts said 0.03928, which makes no
 * difference at 8 bits.)
 *
 * The effective background of a text is the background colours of the element and its ancestors
 * composited bottom-up over the white canvas (source-over); a semi-transparent text colour is
 * composited over that. Background images are not read (the console has none), and neither are
 * elements positioned over others from outside the ancestor chain (the console has none behind text).
 */

export type Rgba = [number, number, number, number];

export function parseColor(css: string): Rgba {
  const m = /^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)$/.exec(css.trim());
  if (!m) throw new Error(`a colour this check does not read: ${css}`);
  const alpha = m[4] === undefined ? 1 : m[4].endsWith("%") ? Number.parseFloat(m[4]) / 100 : Number(m[4]);
  return [Number(m[1]), Number(m[2]), Number(m[3]), alpha];
}

/** `top` over `bottom` (source-over); the result is opaque when `bottom` is. */
export function over(top: Rgba, bottom: Rgba): Rgba {
  const a = top[3] + bottom[3] * (1 - top[3]);
  if (a === 0) return [0, 0, 0, 0];
  const mix = (i: 0 | 1 | 2) => (top[i] * top[3] + bottom[i] * bottom[3] * (1 - top[3])) / a;
  return [mix(0), mix(1), mix(2), a];
}

export function relativeLuminance([r, g, b]: Rgba): number {
  const lin = (c8: number) => {
    const c = c8 / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
}

export function contrastRatio(a: Rgba, b: Rgba): number {
  const [hi, lo] = [relativeLuminance(a), relativeLuminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/** Large scale text (WCAG 2.2 glossary): 18 pt, or 14 pt bold. */
export const isLargeText = (px: number, weight: number) => px >= 24 || (px >= 18.66 && weight >= 700);

/** One visible text as the page rendered it: its colour and every background from it up to the root. */
interface RenderedText {
  text: string;
  where: string;
  color: string;
  backgrounds: string[];
  fontSize: number;
  fontWeight: number;
}

export interface ContrastFinding {
  text: string;
  where: string;
  ratio: number;
  required: number;
  color: string;
  background: string;
}

/**
 * Run in the page (a script, since this project's types have no DOM): every element with text of
 * its own or a field value, that a sighted user can see, with its colour and the background of it
 * and of each ancestor, innermost first.
 */
const RENDERED_TEXTS = `(() => {
  const out = [];
  const describe = (el) =>
    el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.classList.length ? "." + [...el.classList].join(".") : "");
  const visible = (el) => {
    const rect = el.getBoundingClientRect();
    // Under 2 px is the visually hidden pattern (sr-only); off the page's left or top is a skip link at rest.
    if (rect.width < 2 || rect.height < 2 || rect.right <= 0 || rect.bottom <= 0) return false;
    if (getComputedStyle(el).visibility !== "visible") return false;
    for (let e = el; e; e = e.parentElement) if (getComputedStyle(e).opacity === "0") return false;
    return true;
  };
  for (const el of document.body.querySelectorAll("*")) {
    if (el instanceof HTMLOptionElement) continue;
    const own = [...el.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE).map((n) => n.textContent || "").join("").trim();
    const field =
      el instanceof HTMLInputElement && !["checkbox", "radio", "hidden"].includes(el.type) ? el.value
      : el instanceof HTMLTextAreaElement ? el.value
      : el instanceof HTMLSelectElement ? (el.selectedOptions[0] ? el.selectedOptions[0].text : "")
      : "";
    const text = (own || field).trim();
    if (!text || !visible(el)) continue;
    const style = getComputedStyle(el);
    const backgrounds = [];
    for (let e = el; e; e = e.parentElement) backgrounds.push(getComputedStyle(e).backgroundColor);
    out.push({
      text: text.slice(0, 60),
      where: describe(el),
      color: style.color,
      backgrounds,
      fontSize: parseFloat(style.fontSize),
      fontWeight: Number(style.fontWeight),
    });
  }
  return out;
})()`;

/**
 * Every visible text of the page now (each element's own text nodes, and the values of inputs,
 * selects and text areas), with its ratio against its effective background; those under the
 * 1.4.3 minimum in `failures`.
 */
export async function measureContrast(page: Page): Promise<{ checked: number; failures: ContrastFinding[] }> {
  const texts = await page.evaluate<RenderedText[]>(RENDERED_TEXTS);
  const failures: ContrastFinding[] = [];
  const canvas: Rgba = [255, 255, 255, 1];
  for (const t of texts) {
    const background = t.backgrounds.reduceRight<Rgba>((under, css) => over(parseColor(css), under), canvas);
    const ratio = contrastRatio(over(parseColor(t.color), background), background);
    const required = isLargeText(t.fontSize, t.fontWeight) ? 3 : 4.5;
    if (ratio < required) {
      failures.push({
        text: t.text,
        where: t.where,
        ratio: Math.round(ratio * 100) / 100,
        required,
        color: t.color,
        background: `rgb(${background.slice(0, 3).map(Math.round).join(", ")})`,
      });
    }
  }
  return { checked: texts.length, failures };
}
