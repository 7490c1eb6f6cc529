// An agent that makes its HTTP requests itself, written with the official TypeScript MCP SDK's
// client (pinned in package-lock.json): it gets a seller's 402 with fetch, asks Paywarden's
// pay_x402 for the payment header, sends the request again with it, reports the seller's
// PAYMENT-RESPONSE with report_receipt, and asks pay_x402 again with the same key. It prints one
// JSON line of what it saw. The SDK's client checks every structured result against the tool's
// declared output schema, and throws when one does not match.
//
// Usage: node pay_x402_client.mjs MCP_URL TOKEN SELLER_URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [mcpUrl, token, sellerUrl] = process.argv.slice(2);
if (!mcpUrl || !token || !sellerUrl) {
  throw new Error("usage: node pay_x402_client.mjs MCP_URL TOKEN SELLER_URL");
}

const client = new Client({ name: "pay-x402-typescript-agent", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
await client.connect(transport);
try {
  const tools = (await client.listTools()).tools.map((tool) => tool.name);

  const asked = await fetch(sellerUrl);
  const required = JSON.parse(Buffer.from(asked.headers.get("payment-required"), "base64").toString("utf8"));
  const payFor = {
    url: sellerUrl,
    accepts: required.accepts,
    x402Version: required.x402Version,
    resource: required.resource,
  };
  const signed = await client.callTool({ name: "pay_x402", arguments: payFor });
  if (signed.isError) {
    throw new Error(`pay_x402 failed: ${JSON.stringify(signed.structuredContent)}`);
  }
  const handed = signed.structuredContent;

  const paid = await fetch(sellerUrl, { headers: { [handed.headerName]: handed.headerValue } });
  const body = await paid.json();
  const paymentResponse = paid.headers.get("payment-response");

  const reported = await client.callTool({
    name: "report_receipt",
    arguments: { idempotencyKey: handed.idempotencyKey, paymentResponse },
  });
  const replay = await client.callTool({
    name: "pay_x402",
    arguments: { ...payFor, idempotencyKey: handed.idempotencyKey },
  });
  console.log(
    JSON.stringify({
      tools,
      askedStatus: asked.status,
      signed: handed,
      paidStatus: paid.status,
      body,
      paymentResponse,
      reported: reported.structuredContent,
      replay: replay.structuredContent,
    }),
  );
} finally {
  await client.close();
}
