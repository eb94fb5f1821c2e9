export { createWaitingRoom, DEFAULT_ABANDON_SECONDS } from "./waiting-room.js";
export type { WaitingRoom, WaitingRoomOptions } from "./waiting-room.js";
export type { KeptDecisions } from "./operator.js";
export type * from "./types.js";
export { adviseFan } from "./advice.js";
export type { Advice, AdviceInput } from "./advice.js";
export { SCRIPT_OUTCOMES, OUTCOME_MESSAGES } from "./codes.js";
export type { ScriptOutcome } from "./codes.js";
export { EVENT_ID_PATTERN, FAN_ID_PATTERN, limitKey, waitingRoomKeys } from "./keys.js";
export type { WaitingRoomKeys } from "./keys.js";
export { commitmentOf, generateSeed, lotteryOrder, seedMatchesCommitment } from "./lottery.js";
export { createTokenService, TOKEN_ISSUER } from "./tokens.js";
export type {
  AccessTokenClaims,
  QueueTokenClaims,
  TokenCheck,
  TokenFailure,
  TokenKind,
  TokenService,
} from "./tokens.js";
export { generateSigningKey, jwksOf, loadSigningKeys, parseSigningKeys, TOKEN_ALGORITHMS } from "./signing-keys.js";
export type {
  AsymmetricAlgorithm,
  JsonWebKeySet,
  PublicJwk,
  SigningKeyInput,
  SigningKeySet,
  TokenAlgorithm,
} from "./signing-keys.js";
