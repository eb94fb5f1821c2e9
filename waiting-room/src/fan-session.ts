/**
 * What the fan page keeps for a reload to resume where the tab was (storage.ts says where it is
 * kept). Plain types, no DOM, so the fan's model can be tested under Node.
 */
export interface StoredHold {
  holdId: string;
  seats: string[];
  generalAdmission?: { id: string; quantity: number };
  expiresAt: string;
  amount: number;
}

export interface StoredPayment {
  /** The Idempotency-Key of the last attempt. */
  key: string;
  holdId: string;
  paymentToken: string;
  /** The attempt got a definite answer; a new attempt needs a new key. */
  settled: boolean;
}

export interface StoredPurchase {
  purchaseId: string;
  status: string;
  seats: string[];
  generalAdmission?: { id: string; quantity: number };
  amount: number;
}

export interface FanSession {
  fanId: string;
  queueToken?: string;
  accessToken?: string;
  accessExpiresAt?: string;
  /** The most people ever seen ahead of this fan: the start of the progress bar. */
  firstAhead?: number;
  /**
   * The line was restarted after a failure (this fan was placed again): its commitment was
   * published then, not before the sale, and the page must not claim otherwise.
   */
  lineRestarted?: boolean;
  /**
   * The lottery commitment as this fan first saw it (the join's answer): the revealed seed is
   * checked against this one, not against what the box office serves later.
   */
  commitment?: string;
  hold?: StoredHold;
  payment?: StoredPayment;
  purchase?: StoredPurchase;
}
