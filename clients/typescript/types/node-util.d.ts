// node:util's parseArgs, the one Node built-in src/cli.ts uses, declared as the CLI calls it: the
// client's own TypeScript has no Node types ("types": [] in tsconfig.json), so that nothing else in
// the package can lean on Node by mistake. Not shipped: dist/cli.d.ts does not mention it.
declare module "node:util" {
  export function parseArgs(config: {
    args: string[];
    options: Record<string, { type: "string" | "boolean"; short?: string }>;
    strict: boolean;
    allowPositionals: boolean;
    tokens: boolean;
  }): unknown;
}
