/**
 * The log of operator actions: who (the token's name), what (method, route, event, a summary of
 * the body), when, and the answer's status. One DynamoDB item per action, kept for good (it is an
 * audit trail, small: an on-sale has tens of operator actions, not millions):
 *
 *   PK `EVT#<eventId>#OPLOG` (`OPLOG#GLOBAL` for an action on no event), SK `<at ISO>#<requestId>`
 *   GSI1PK `OPLOG#<YYYY-MM-DD>`, GSI1SK `<at ISO>#<requestId>`  (every action of a day)
 *
 * so an event's actions are one Query of its partition and a day's one Query of the index, newest
 * first, a page at a time (the cursor is the last key, opaque). Written conditionally
 * (`attribute_not_exists`): a request id is logged once. The gateway writes the item after the
 * action answered; a log DynamoDB cannot take then is kept in the process log only (a warn).
 */
import { PutCommand, QueryCommand, type DynamoDBDocumentClient } from "@aws-sdk/lib-dynamodb";
import { guard } from "../inventory/store.js";

export interface OperatorAction {
  at: string;
  /** The token's name (ADMIN_TOKEN is "default"). */
  operator: string;
  role: "admin" | "read";
  method: string;
  /** The route's pattern, e.g. `/v1/admin/events/{eventId}/waiting-room`. */
  route: string;
  /** The path as asked. */
  path: string;
  eventId?: string;
  /** The request body in brief (src/http/routes/admin/action-log.ts: `summarize`). */
  summary?: Record<string, unknown>;
  status: number;
  /** The error code of a refusal. */
  code?: string;
  requestId: string;
}

export interface ActionPage {
  actions: OperatorAction[];
  /** Pass it back for the next (older) page; absent on the last one. */
  cursor?: string;
}

export interface ActionLog {
  record(action: OperatorAction): Promise<void>;
  /** One event's actions, newest first. */
  forEvent(eventId: string, page: { limit: number; cursor?: string | undefined }): Promise<ActionPage>;
  /** Every action of a UTC day (`YYYY-MM-DD`), newest first. */
  forDay(day: string, page: { limit: number; cursor?: string | undefined }): Promise<ActionPage>;
}

export class InvalidCursorError extends Error {
  override name = "InvalidCursorError";
}

const GLOBAL = "OPLOG#GLOBAL";

export function createActionLog(deps: { doc: DynamoDBDocumentClient; tableName: string }): ActionLog {
  const { doc, tableName } = deps;

  async function page(
    what: string,
    input: { IndexName?: string; key: string; value: string },
    { limit, cursor }: { limit: number; cursor?: string | undefined },
  ): Promise<ActionPage> {
    const start = cursor === undefined ? undefined : decodeCursor(cursor);
    return guard(what, async () => {
      const out = await doc.send(
        new QueryCommand({
          TableName: tableName,
          ...(input.IndexName ? { IndexName: input.IndexName } : {}),
          KeyConditionExpression: `${input.key} = :pk`,
          ExpressionAttributeValues: { ":pk": input.value },
          ScanIndexForward: false,
          Limit: limit,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      const actions = (out.Items ?? []).map(toAction);
      return out.LastEvaluatedKey ? { actions, cursor: encodeCursor(out.LastEvaluatedKey) } : { actions };
    });
  }

  return {
    async record(action) {
      const sk = `${action.at}#${action.requestId}`;
      await guard("recordOperatorAction", () =>
        doc.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              PK: action.eventId ? `EVT#${action.eventId}#OPLOG` : GLOBAL,
              SK: sk,
              GSI1PK: `OPLOG#${action.at.slice(0, 10)}`,
              GSI1SK: sk,
              entity: "OPLOG",
              ...action,
            },
            ConditionExpression: "attribute_not_exists(PK)",
          }),
        ),
      ).catch((err: unknown) => {
        // A retry of a write that landed: it is logged already.
        if ((err as { cause?: { name?: string } }).cause?.name === "ConditionalCheckFailedException") return;
        throw err;
      });
    },
    forEvent: (eventId, p) => page("operatorActionsOfEvent", { key: "PK", value: `EVT#${eventId}#OPLOG` }, p),
    forDay: (day, p) => page("operatorActionsOfDay", { IndexName: "GSI1", key: "GSI1PK", value: `OPLOG#${day}` }, p),
  };
}

function toAction(item: Record<string, unknown>): OperatorAction {
  const { PK: _pk, SK: _sk, GSI1PK: _g, GSI1SK: _gs, entity: _e, ...rest } = item;
  return rest as unknown as OperatorAction;
}

function encodeCursor(key: Record<string, unknown>): string {
  return Buffer.from(JSON.stringify(key)).toString("base64url");
}

/** Only keys this log writes: a cursor cannot point a Query at another entity's partition. */
function decodeCursor(cursor: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
  } catch {
    throw new InvalidCursorError("the cursor is not one this log gave");
  }
  if (typeof parsed !== "object" || parsed === null)
    throw new InvalidCursorError("the cursor is not one this log gave");
  const entries = Object.entries(parsed);
  const allowed = new Set(["PK", "SK", "GSI1PK", "GSI1SK"]);
  if (
    entries.length === 0 ||
    !entries.every(([k, v]) => allowed.has(k) && typeof v === "string" && v.length < 512) ||
    !entries.some(
      ([k, v]) => (k === "PK" || k === "GSI1PK") && /^(EVT#[A-Za-z0-9_]{1,32}#OPLOG|OPLOG#.+)$/.test(String(v)),
    )
  ) {
    throw new InvalidCursorError("the cursor is not one this log gave");
  }
  return Object.fromEntries(entries) as Record<string, string>;
}
