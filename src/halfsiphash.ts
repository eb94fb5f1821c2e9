/**
 * HalfSipHash-2-4 with a 32-bit output (Aumasson and Bernstein's reference halfsiphash.c, the
 * variant the Linux kernel uses for hash tables): a keyed pseudorandom function on short inputs,
 * so that whoever chooses the inputs but does not know the 64-bit key cannot choose where they
 * hash. Checked against the reference's test vectors (test/waiting-room/fan-shards.test.ts).
 *
 * 32-bit words, so it runs on JavaScript's int32 arithmetic (Math.imul is not needed: only
 * additions, rotations and xors).
 */

/** A HalfSipHash key: two 32-bit words, little-endian from 8 bytes. */
export interface HalfSipKey {
  k0: number;
  k1: number;
}

/** The key in 8 bytes (16 hex digits): bytes 0-3 are k0, 4-7 k1, each little-endian. */
export function halfSipKeyFromHex(hex: string): HalfSipKey {
  if (!/^[0-9a-f]{16}$/i.test(hex)) throw new RangeError("a HalfSipHash key is 16 hex digits");
  const b = Buffer.from(hex, "hex");
  return { k0: b.readUInt32LE(0), k1: b.readUInt32LE(4) };
}

/** HalfSipHash-2-4 of `bytes[0..length)` under `key`, as an unsigned 32-bit number. */
export function halfSipHash24(key: HalfSipKey, bytes: Uint8Array, length = bytes.length): number {
  let v0 = key.k0 | 0;
  let v1 = key.k1 | 0;
  let v2 = 0x6c796765 ^ key.k0;
  let v3 = 0x74656462 ^ key.k1;
  // c rounds (2) after each whole word of the input, then after the last word (its partial bytes
  // and the length), then d rounds (4) to finish, with v2 ^= 0xff and no word (m = 0 xors nothing).
  // One round, written out in a loop: as a closure it put v0..v3 in a context object, about 4x
  // slower in a micro-benchmark.
  const end = length - (length % 4);
  for (let i = 0; i <= end + 4; i += 4) {
    let m = 0;
    let rounds = 2;
    if (i < end) {
      m = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    } else if (i === end) {
      const rest = length - end;
      m = length << 24;
      if (rest > 2) m |= bytes[end + 2]! << 16;
      if (rest > 1) m |= bytes[end + 1]! << 8;
      if (rest > 0) m |= bytes[end]!;
    } else {
      v2 ^= 0xff;
      rounds = 4;
    }
    v3 ^= m;
    for (let r = 0; r < rounds; r++) {
      v0 = (v0 + v1) | 0;
      v1 = (v1 << 5) | (v1 >>> 27);
      v1 ^= v0;
      v0 = (v0 << 16) | (v0 >>> 16);
      v2 = (v2 + v3) | 0;
      v3 = (v3 << 8) | (v3 >>> 24);
      v3 ^= v2;
      v0 = (v0 + v3) | 0;
      v3 = (v3 << 7) | (v3 >>> 25);
      v3 ^= v0;
      v2 = (v2 + v1) | 0;
      v1 = (v1 << 13) | (v1 >>> 19);
      v1 ^= v2;
      v2 = (v2 << 16) | (v2 >>> 16);
    }
    v0 ^= m;
  }
  return (v1 ^ v3) >>> 0;
}

// A string's UTF-8 bytes go here when it is all ASCII (a fan id, as a rule), with no allocation.
const scratch = new Uint8Array(512);

/** HalfSipHash-2-4 of a string's UTF-8 bytes. */
export function halfSipHashString(key: HalfSipKey, text: string): number {
  const n = text.length;
  if (n <= scratch.length) {
    let ascii = true;
    for (let i = 0; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c > 0x7f) {
        ascii = false;
        break;
      }
      scratch[i] = c;
    }
    if (ascii) return halfSipHash24(key, scratch, n);
  }
  return halfSipHash24(key, Buffer.from(text, "utf8"));
}
