import { defineConfig } from "drizzle-kit";

// Flat, numbered SQL files that both `wrangler d1 migrations apply` and the test setup read.
export default defineConfig({
  dialect: "sqlite",
  schema: "./src/db/schema.ts",
  out: "./migrations",
});
