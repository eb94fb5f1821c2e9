/**
 * Content negotiation for bodies the gateway keeps compressed (the section seat map): which of
 * br, gzip and identity a client's Accept-Encoding allows, best first (RFC 9110 §12.5.3).
 *
 * q-values are honoured: a coding with q=0 is never sent, and a higher q wins; among equal q, br
 * (smallest) before gzip before identity. `*` stands for every coding the header does not name.
 * identity is acceptable unless refused (`identity;q=0`, or `*;q=0` without naming identity); a
 * client that refuses all three still gets identity, the one representation every client can
 * read, rather than an error.
 *
 * Clients send a handful of distinct headers, so answers are remembered per header value (a
 * bounded map): per request this is one map lookup, not a parse.
 */
export type ContentCoding = "br" | "gzip" | "identity";

const PREFERENCE: readonly ContentCoding[] = ["br", "gzip", "identity"];
const MAX_REMEMBERED = 256;
const remembered = new Map<string, ContentCoding>();

export function negotiateEncoding(acceptEncoding: string | undefined): ContentCoding {
  if (!acceptEncoding) return "identity";
  const known = remembered.get(acceptEncoding);
  if (known) return known;
  const chosen = choose(acceptEncoding);
  if (remembered.size >= MAX_REMEMBERED) remembered.clear();
  remembered.set(acceptEncoding, chosen);
  return chosen;
}

function choose(header: string): ContentCoding {
  const q = new Map<string, number>();
  for (const part of header.split(",")) {
    const [rawName = "", ...params] = part.split(";");
    const name = rawName.trim().toLowerCase();
    if (!name) continue;
    let weight = 1;
    for (const param of params) {
      const [key = "", value = ""] = param.split("=");
      if (key.trim().toLowerCase() !== "q") continue;
      const parsed = Number(value.trim());
      weight = Number.isFinite(parsed) ? Math.min(1, Math.max(0, parsed)) : 0;
    }
    // `x-gzip` is gzip (RFC 9110 §8.4.1.3); a coding named twice keeps its best weight.
    const coding = name === "x-gzip" ? "gzip" : name;
    q.set(coding, Math.max(q.get(coding) ?? 0, weight));
  }
  const star = q.get("*");
  const weightOf = (coding: ContentCoding): number => {
    const named = q.get(coding);
    if (named !== undefined) return named;
    if (star !== undefined) return star;
    return coding === "identity" ? 1 : 0;
  };
  let best: ContentCoding = "identity";
  let bestWeight = 0;
  for (const coding of PREFERENCE) {
    const weight = weightOf(coding);
    if (weight > bestWeight) {
      best = coding;
      bestWeight = weight;
    }
  }
  return best;
}
