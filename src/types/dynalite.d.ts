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
  }

  function dynalite(options?: DynaliteOptions): Server;
  export default dynalite;
}
