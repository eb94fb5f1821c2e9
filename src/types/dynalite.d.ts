declare module "dynalite" {
  import type { Server } from "node:http";

  interface DynaliteOptions {
    path?: string;
    createTableMs?: number;
    deleteTableMs?: number;
    updateTableMs?: number;
    maxItemSizeKb?: number;
    verbose?: boolean;
    debug?: boolean;
    /** patches/dynalite+4.0.0.patch: `aws` conflicts and throttles as DynamoDB does. */
    mode?: "default" | "aws";
    /** A TransactWriteItems stays in flight at least this long. */
    transactionMs?: number;
    /** aws mode: write units/s per partition. */
    partitionWcu?: number;
    /** aws mode: read units/s per partition. */
    partitionRcu?: number;
  }

  function dynalite(options?: DynaliteOptions): Server;
  export default dynalite;
}
