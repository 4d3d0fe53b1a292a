// Vite's `?raw` imports (a file's text), which the client tests use to read the committed
// OpenAPI snapshot, the generated types and the client's README.
declare module "*?raw" {
  const text: string;
  export default text;
}
