/**
 * Content negotiation for bodies the gateway keeps compressed (the section seat map): which of
 * br, gzip and identity a client's Accept-Encoding allows, best first (RFC 9110 §12.5.3).
 *
 * q-values are honoured: a coding with q=0 is never sent, and a higher q wins; among equal q, br
 * (smallest) before gzip before identity. `*` stands for every coding the header does not name.
 * identity not given a weight (not named, no `*`) is the fallback: sent only when neither br nor
 * gzip is acceptable. A client that refuses all three still gets identity, the one representation
 * every client can read, rather than an error.
 *
 * Clients send a handful of distinct headers, so answers are remembered per header value (a
 * bounded map): per request this is one map lookup, not a parse.
 */
export type ContentCoding = "br" | "gzip" | "identity";

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
  const weightOf = (coding: "br" | "gzip"): number => q.get(coding) ?? star ?? 0;
  const best: "br" | "gzip" = weightOf("gzip") > weightOf("br") ? "gzip" : "br";
  const bestWeight = weightOf(best);
  // identity weighs only when the header gives it a weight (named, or `*`); unnamed it is the
  // fallback, below every coding the client accepts.
  const identity = q.get("identity") ?? star;
  if (identity !== undefined && identity > bestWeight) return "identity";
  return bestWeight > 0 ? best : "identity";
}
