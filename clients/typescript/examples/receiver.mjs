// A webhook receiver for trying `tender listen` on your machine: it verifies each delivery with
// the endpoint's secret and prints what it got.
//   TENDER_WEBHOOK_SECRET=whsec_… node clients/typescript/examples/receiver.mjs   (Node 20+)
import { createServer } from "node:http";
import { webhooks } from "@tender/client";

const secret = process.env.TENDER_WEBHOOK_SECRET;
const port = Number(process.env.PORT ?? 3000);

createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  try {
    const event = await webhooks.verify(Buffer.concat(chunks), req.headers, secret);
    console.log(`receiver: verified ${event.type} ${event.id}`);
    res.writeHead(200).end("ok");
  } catch (error) {
    console.log(`receiver: refused: ${error.message}`);
    res.writeHead(400).end("Invalid signature");
  }
}).listen(port, "127.0.0.1", () => console.log(`receiver: listening on http://127.0.0.1:${port}/webhooks`));
